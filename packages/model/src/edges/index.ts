export * from './build-edges.js';
export * from './edge-filter.js';
export * from './edge-table.js';
export * from './overview.js';
export * from './pyramid.js';
