// A process flood of uid 65534 against discovery (discovery-flood-scene.ts says how): the
// victim is a real process tree of uid 65533, a fake `mpirun` and two look-alike ranks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupFlood, fakeStarterJob, floodAgainst, VICTIM } from './discovery-flood-scene.js';

afterAll(cleanupFlood);
beforeAll(() => {
  expect(process.getuid?.()).toBe(0);
});

describe('a process flood of uid 65534 against discovery', () => {
  it(
    "keeps the victim's and root's jobs live and snapshotable, and stores at most the per-uid bound of the flooder's",
    {
      timeout: 300_000,
    },
    () => floodAgainst((dir) => fakeStarterJob(dir, VICTIM)),
  );
});
