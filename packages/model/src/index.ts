export * from './analysis/index.js';
export * from './assert.js';
export * from './brand.js';
export * from './errors.js';
export * from './result.js';
export * from './snapshot-spec.js';
export * from './snapshot-validate.js';
export * from './synthetic.js';
