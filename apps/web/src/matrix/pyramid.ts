// The matrix's aggregation pyramid is the model's (@mqd/model's edges/pyramid.ts: the server
// makes the overview's first level with it); re-exported for the matrix's own files.
export * from '@mqd/model/pyramid';
