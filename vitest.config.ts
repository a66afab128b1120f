import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests run on the TypeScript sources of the workspace packages (no build needed for them);
// child processes that must run compiled JS (the DLL host) find it under dist/.
const src = (p: string) => fileURLToPath(new URL(p, import.meta.url));
// At the end of the unit and mpi runs: no process they started is left in a tracing stop.
const tracingStops = src('./scripts/tracing-stops-teardown.mjs');
const alias = {
  // Longer keys first (see below): the worker-light subpath of the model.
  '@mqd/model/edge-table': src('./packages/model/src/edges/edge-table.ts'),
  '@mqd/model/edge-filter': src('./packages/model/src/edges/edge-filter.ts'),
  '@mqd/model/pyramid': src('./packages/model/src/edges/pyramid.ts'),
  '@mqd/model': src('./packages/model/src/index.ts'),
  // Longer keys first: '@mqd/core' would otherwise also rewrite '@mqd/core/testing'.
  '@mqd/core/testing': src('./packages/mqd-core/test/kits.ts'),
  '@mqd/core': src('./packages/mqd-core/src/index.ts'),
  '@mqd/mpir': src('./packages/mpir/src/index.ts'),
  '@mqd/testkit': src('./packages/testkit/src/index.ts'),
  '@mqd/server/agent': src('./apps/server/src/agent-entry.ts'),
  '@mqd/server': src('./apps/server/src/index.ts'),
  '@mqd/cli': src('./apps/cli/src/index.ts'),
};

export default defineConfig({
  resolve: { alias },
  test: {
    projects: [
      {
        resolve: { alias },
        test: {
          name: 'unit',
          include: ['packages/*/test/**/*.test.ts', 'apps/*/test/**/*.test.ts'],
          exclude: ['**/*.mpi.test.ts', '**/node_modules/**'],
          globalSetup: [tracingStops],
          // The attacker tests start `mqd serve`, agents and readers from the sources (tsx) and
          // compile their fakes with cc: seconds on an idle machine, several times that on a
          // loaded one. A hung test still fails, a minute later.
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        // Browser end-to-end: Debian's chromium driven by playwright-core against the real
        // server and real hung jobs. One file at a time.
        resolve: { alias },
        test: {
          name: 'e2e',
          include: ['e2e/test/**/*.e2e.test.ts'],
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
      {
        // Real MPI jobs: one file at a time, so ranks do not fight over the two cores.
        resolve: { alias },
        test: {
          name: 'mpi',
          include: ['packages/*/test/**/*.mpi.test.ts', 'apps/*/test/**/*.mpi.test.ts'],
          globalSetup: [tracingStops],
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
