// The demo source (?demo=<ranks>&scenario=...): a synthetic job generated in the page, so the
// dashboard can be tried, developed and tested without a server or an MPI job. "halo" is this
// package's generator (moving traffic plus a hang, as a series for the timeline); the others
// are @mqd/model's scenario generators, one snapshot each.
import {
  assertUnreachable,
  type JobSnapshot,
  syntheticCollectiveHang,
  syntheticHaloSeries,
  syntheticRingDeadlock,
  syntheticStacksJob,
  syntheticWrongTagHang,
} from '@mqd/model';
import { type LoadedSnapshot, localSnapshot } from './data.js';
import type { TimelineInput } from './timeline/timeline.js';
import type { DemoScenario } from './url-state.js';

const seriesCache = new Map<string, TimelineInput[]>();

function scenarioSnapshot(ranks: number, scenario: Exclude<DemoScenario, 'halo'>): JobSnapshot {
  switch (scenario) {
    case 'ring':
      return syntheticRingDeadlock({ ranks, style: 'openmpi' });
    case 'wrong-tag':
      return syntheticWrongTagHang({ ranks, style: 'mpich' });
    case 'collective':
      return syntheticCollectiveHang({ ranks: Math.max(3, ranks) });
    case 'stacks':
      return syntheticStacksJob({ ranks, scenario: 'mixed' });
    case 'stacks-mismatch':
      return syntheticStacksJob({ ranks: Math.max(2, ranks), scenario: 'collective-mismatch' });
    default:
      return assertUnreachable(scenario);
  }
}

/** Snapshots of the demo job, oldest first (several for "halo", one otherwise). */
export function demoSeries(ranks: number, scenario: DemoScenario): TimelineInput[] {
  const key = `${ranks}:${scenario}`;
  let series = seriesCache.get(key);
  if (!series) {
    if (scenario === 'halo') {
      // Fewer steps for big jobs: each 16,384-rank snapshot is tens of MB of objects.
      series = syntheticHaloSeries({ ranks, seed: 1 }, ranks > 4096 ? 4 : 8);
    } else {
      const snapshot = scenarioSnapshot(ranks, scenario);
      series = [{ id: `demo-${scenario}-${ranks}`, takenAt: snapshot.takenAt, snapshot }];
    }
    seriesCache.clear();
    seriesCache.set(key, series);
  }
  return series;
}

export function demoSnapshot(ranks: number, scenario: DemoScenario): LoadedSnapshot {
  const series = demoSeries(ranks, scenario);
  const last = series[series.length - 1];
  if (!last) throw new Error('demo series is empty');
  return localSnapshot(`demo:${last.id}`, last.snapshot, false);
}
