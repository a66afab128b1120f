export * from './build-edges.js';
export * from './edge-table.js';
export * from './overview.js';
