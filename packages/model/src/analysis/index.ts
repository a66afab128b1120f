export * from './classes.js';
export * from './comm.js';
export * from './explain.js';
export * from './near-miss.js';
export * from './progress.js';
export * from './ranges.js';
export * from './snapshot-index.js';
export * from './wait-graph.js';
