// One real fixture job at a time and one Snapshotter per test file (for `@mqd/core/testing`):
// the job is disposed after each test, even a failed one, and the Snapshotter and any job still
// alive after the file.
import { disposeAll, type FixtureJob, type LaunchOptions, launchFixture } from '@mqd/testkit';
import { afterAll, afterEach } from 'vitest';
import { Snapshotter } from '../src/index.js';

export interface FixtureRig {
  readonly snapshotter: Snapshotter;
  /** Launches a fixture; it is disposed after the current test. */
  launch(o: LaunchOptions): Promise<FixtureJob>;
}

export function fixtureRig(): FixtureRig {
  let job: FixtureJob | null = null;
  const snapshotter = new Snapshotter();
  afterEach(async () => {
    await job?.dispose();
    job = null;
  });
  afterAll(async () => {
    await snapshotter.dispose();
    await disposeAll();
  });
  return {
    snapshotter,
    async launch(o) {
      await job?.dispose();
      job = await launchFixture(o);
      return job;
    },
  };
}
