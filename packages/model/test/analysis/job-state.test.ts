import {
  JOB_STATE_WORDS,
  type JobStateStep,
  jobState,
  jobStateRank,
  stateOfVerdict,
  stateSinceText,
  unchangedText,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';

const T0 = Date.UTC(2026, 0, 5, 22, 47, 0);
const PERIOD = 15_000;

/** One step per digest letter ('-': no rank read), PERIOD apart, 4 ranks, `pending` queued. */
function steps(digests: string, pending = 2, partial: readonly number[] = []): JobStateStep[] {
  return [...digests].map((d, i) => ({
    at: T0 + i * PERIOD,
    digest: d === '-' ? '' : d,
    ranks: 4,
    read: d === '-' ? 0 : partial.includes(i) ? 3 : 4,
    pending,
  }));
}
const hh = (ms: number) => new Date(ms).toISOString().slice(11, 16);

describe('jobState', () => {
  it('stuck since the first snapshot of the run of equal digests, however long the run', () => {
    const s = steps(`ab${'c'.repeat(150)}`);
    const a = jobState({ steps: s, ended: false, hungAfter: 3 });
    expect(a.state).toBe('hung');
    expect(a.since).toBe(T0 + 2 * PERIOD);
    expect(a.sinceSnapshots).toBe(150);
    expect(a.unchangedSince).toBe(T0 + 2 * PERIOD);
    expect(unchangedText(a, hh)).toBe('No change since 22:47 (150 snapshots)');
    expect(stateSinceText(a, hh)).toBe('hung since 22:47');
  });

  it('the order of the steps given does not matter', () => {
    const s = steps('abbbb');
    const a = jobState({ steps: [...s].reverse(), ended: false, hungAfter: 3 });
    expect(a.since).toBe(T0 + PERIOD);
    expect(a.state).toBe('hung');
  });

  it('waiting until hungAfter equal snapshots, then hung', () => {
    expect(jobState({ steps: steps('abb'), ended: false, hungAfter: 3 }).state).toBe('waiting');
    expect(jobState({ steps: steps('abbb'), ended: false, hungAfter: 3 }).state).toBe('hung');
    expect(jobState({ steps: steps('a'), ended: false, hungAfter: 3 }).reason).toMatch(/one snapshot so far/);
  });

  it('a snapshot that read no rank is a gap: it neither ends nor restarts the run', () => {
    const a = jobState({ steps: steps('abb-b-b'), ended: false, hungAfter: 3 });
    expect(a.state).toBe('hung');
    expect(a.since).toBe(T0 + PERIOD);
    expect(a.sinceSnapshots).toBe(6);
    const none = jobState({ steps: steps('--'), ended: false, hungAfter: 3 });
    expect(none.state).toBe('unknown');
    expect(none.since).toBeNull();
  });

  it('a run with a partly read snapshot waits, it is not hung', () => {
    const a = jobState({ steps: steps('abbbb', 2, [3]), ended: false, hungAfter: 3 });
    expect(a.state).toBe('waiting');
    expect(a.reason).toMatch(/could not be read/);
  });

  it('progressing since the snapshot the run of changes starts from (as the watch counts)', () => {
    const a = jobState({ steps: steps('aabcd'), ended: false, hungAfter: 3 });
    expect(a.state).toBe('progressing');
    expect(a.since).toBe(T0 + PERIOD);
    expect(a.sinceSnapshots).toBe(4);
    expect(unchangedText(a, hh)).toBeNull();
  });

  it('nothing queued is computing, whatever the digests say', () => {
    expect(jobState({ steps: steps('aaaa', 0), ended: false, hungAfter: 3 }).state).toBe('computing');
  });

  it('the diagnosis line is the answer’s diagnosis, the reason otherwise', () => {
    const a = jobState({
      steps: steps('aaaa'),
      ended: false,
      hungAfter: 3,
      diagnosis: 'Deadlock: ranks 0-1 wait in MPI_Recv',
    });
    expect(a.diagnosis).toBe('Deadlock: ranks 0-1 wait in MPI_Recv');
    expect(jobState({ steps: steps('aaaa'), ended: false, hungAfter: 3 }).diagnosis).toBe(a.reason);
  });

  it('the hang watch’s verdict decides, and its budget pause keeps it', () => {
    const a = jobState({
      steps: steps('abbb'),
      ended: false,
      hungAfter: 3,
      watch: {
        state: 'hung',
        since: T0 + 2 * PERIOD,
        diagnosis: 'Deadlock: ranks 0-1',
        confidence: 'high',
        pausedUntil: T0 + 3_600_000,
      },
    });
    expect(a.state).toBe('hung');
    // The stored snapshots' run began before the watch's sample: the earlier one.
    expect(a.since).toBe(T0 + PERIOD);
    expect(a.diagnosis).toBe('Deadlock: ranks 0-1');
    expect(stateSinceText(a, hh)).toBe('hung since 22:47 · sampling paused until 23:47');
    const computing = jobState({
      steps: steps('aaaa'),
      ended: false,
      hungAfter: 3,
      watch: { state: 'computing', since: T0, diagnosis: '4 of 4 ranks compute', confidence: 'high' },
    });
    expect(computing.state).toBe('computing');
    expect(computing.pausedUntil).toBeNull();
  });

  it('an unknown watch verdict falls back to the snapshots', () => {
    const a = jobState({
      steps: steps('abbbb'),
      ended: false,
      hungAfter: 3,
      watch: { state: 'unknown', since: null, diagnosis: 'one sample so far', confidence: null },
    });
    expect(a.state).toBe('hung');
  });

  it('ended is ended', () => {
    const a = jobState({ steps: steps('abbb'), ended: true, hungAfter: 3 });
    expect(a.state).toBe('ended');
    expect(stateSinceText(a, hh)).toBe('ended');
  });

  it('one vocabulary: the diagnosis verdicts map onto it, hung sorts first', () => {
    expect(stateOfVerdict('deadlock')).toBe('hung');
    expect(stateOfVerdict('collective-hang')).toBe('hung');
    expect(stateOfVerdict('stuck')).toBe('hung');
    expect(stateOfVerdict('idle')).toBe('computing');
    expect(stateOfVerdict('progressing')).toBe('progressing');
    expect(stateOfVerdict('unknown')).toBe('unknown');
    expect(JOB_STATE_WORDS[0]).toBe('hung');
    expect(jobStateRank('hung')).toBeLessThan(jobStateRank('computing'));
    expect(jobStateRank('ended')).toBe(JOB_STATE_WORDS.length - 1);
  });
});
