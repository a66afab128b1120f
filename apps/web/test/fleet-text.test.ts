// The Fleet view's words (src/fleet/fleet-text.ts) and its policy form's checks
// (src/fleet/policy-form.ts): what a person reads for every watch state and mode, "since",
// rank ranges, the rows' order, the history's text, and each field's refusal.
import {
  type ApiFleetSample,
  DEFAULT_WATCH_POLICY,
  WATCH_STATES,
  type WatchMode,
  type WatchState,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import {
  coresText,
  endedText,
  formatSince,
  historyText,
  jobIdText,
  leastProgressedText,
  placeText,
  policyText,
  programText,
  ranksOnNodesText,
  sortFleetJobs,
  stateChipText,
  stateWord,
  watchModeText,
} from '../src/fleet/fleet-text.js';
import { parsePolicyFields, policyFields } from '../src/fleet/policy-form.js';
import { fleetJob } from './fleet-fixtures.js';

const NOW = Date.parse('2026-11-27T04:00:00Z');
const UTC = 'UTC';

describe('watch modes and states in words', () => {
  it('says every watch mode', () => {
    const modes: Record<WatchMode, string> = {
      on: 'watched',
      'off-by-job': 'not watched: the job opted out (MQD_WATCH=off)',
      'off-by-policy': 'not watched: outside the policy',
      disabled: 'watch is off',
      budget: 'stop budget used up this hour',
    };
    for (const [mode, words] of Object.entries(modes)) expect(watchModeText(mode as WatchMode)).toBe(words);
  });

  it('says every state, hung with since and confidence', () => {
    const words: Record<WatchState, string> = {
      hung: 'hung since 03:12 AM (high confidence)',
      waiting: 'waiting',
      computing: 'computing',
      progressing: 'progressing',
      unknown: 'not known yet',
    };
    for (const state of WATCH_STATES)
      expect(stateChipText(fleetJob({ state }), NOW, UTC), state).toBe(words[state]);
    expect(stateWord('unknown')).toBe('not known yet');
    expect(stateChipText(fleetJob({ confidence: 'medium' }), NOW, UTC)).toBe(
      'hung since 03:12 AM (medium confidence)',
    );
    expect(stateChipText(fleetJob({ since: null, confidence: null }), NOW, UTC)).toBe('hung');
  });

  it('says when and how a job ended, and nothing while it runs', () => {
    expect(endedText(fleetJob(), NOW, UTC)).toBeNull();
    expect(endedText(fleetJob({ endedAt: '2026-11-27T03:40:10Z', endReason: 'TIMEOUT' }), NOW, UTC)).toBe(
      'ended at 03:40 AM (TIMEOUT)',
    );
    expect(endedText(fleetJob({ endedAt: '2026-11-27T03:40:10Z', endReason: null }), NOW, UTC)).toBe(
      'ended at 03:40 AM',
    );
  });
});

describe('since', () => {
  it('is a time of day today, with the day before, with the year in another year', () => {
    expect(formatSince('2026-11-27T03:12:59Z', NOW, UTC)).toBe('03:12 AM');
    expect(formatSince('2026-11-27T00:00:00Z', NOW, UTC)).toBe('12:00 AM');
    expect(formatSince('2026-11-26T23:05:00Z', NOW, UTC)).toBe('Nov 26, 11:05 PM');
    expect(formatSince('2025-12-31T13:45:00Z', NOW, UTC)).toBe('Dec 31, 2025, 01:45 PM');
    // One helper, the viewer's clock: a 24-hour locale reads 24-hour times.
    expect(formatSince('2026-11-27T13:12:59Z', NOW, UTC, 'en-GB')).toBe('13:12');
    // The viewer's zone decides the day: at 04:00 UTC it is still Nov 26 in New York.
    expect(formatSince('2026-11-26T23:30:00Z', NOW, UTC)).toBe('Nov 26, 11:30 PM');
    expect(formatSince('2026-11-26T23:30:00Z', NOW, 'America/New_York')).toBe('06:30 PM');
    expect(formatSince('not a date', NOW, UTC)).toBe('not a date');
  });
});

describe('ranks, nodes and names', () => {
  it('names the least-progressed ranks as ranges, or nothing', () => {
    expect(leastProgressedText('0-3')).toBe('least progressed: ranks 0-3');
    expect(leastProgressedText('2')).toBe('least progressed: rank 2');
    expect(leastProgressedText('0-1,5')).toBe('least progressed: ranks 0-1, 5');
    expect(leastProgressedText('')).toBeNull();
  });

  it('names the program a starter runs, not the starter; Slurm job names stay', () => {
    const starter = {
      program: 'mpirun',
      command: '/opt/ompi/bin/mpirun -np 4 --oversubscribe /f/build/wrong_tag 3',
    };
    expect(programText(starter)).toBe('wrong_tag');
    expect(programText({ program: 'mpiexec', command: 'mpiexec -n 2 ./compute_loop' })).toBe('compute_loop');
    expect(programText({ program: 'wrong_tag', command: 'mpirun -np 4 ./wrong_tag' })).toBe('wrong_tag');
    expect(programText({ program: 'nightly-cfd', command: 'srun ./cfd' })).toBe('nightly-cfd');
    expect(programText({ program: 'solver', command: './solver --steps=10' })).toBe('solver');
  });

  it('says the job id, the partition and account, the ranks and their nodes', () => {
    expect(jobIdText(fleetJob())).toBe('Slurm job 1234');
    expect(jobIdText(fleetJob({ kind: 'starter', slurmJob: null, key: 'starter:node01:4242:987654' }))).toBe(
      'pid 4242 on node01',
    );
    expect(placeText(fleetJob())).toBe('debug / proj42');
    expect(placeText(fleetJob({ account: null }))).toBe('debug');
    expect(placeText(fleetJob({ partition: null, account: null }))).toBe('—');
    expect(ranksOnNodesText(fleetJob())).toBe('4 ranks on node01, node02');
    expect(ranksOnNodesText(fleetJob({ rankCount: 1, nodes: ['n1'] }))).toBe('1 rank on n1');
    expect(ranksOnNodesText(fleetJob({ rankCount: 4096, nodes: ['a', 'b', 'c', 'd', 'e'] }))).toBe(
      '4,096 ranks on a, b, c and 2 more nodes',
    );
  });
});

describe('order of the rows', () => {
  const jobs = [
    fleetJob({ key: 'p', program: 'p', state: 'progressing', since: '2026-11-27T03:00:00Z' }),
    fleetJob({ key: 'h2', program: 'h2', state: 'hung', since: '2026-11-27T03:30:00Z' }),
    fleetJob({ key: 'u', program: 'u', state: 'unknown', since: null }),
    fleetJob({ key: 'c', program: 'c', state: 'computing', since: '2026-11-27T02:00:00Z' }),
    fleetJob({ key: 'w', program: 'w', state: 'waiting', since: '2026-11-27T03:50:00Z' }),
    fleetJob({ key: 'h1', program: 'h1', state: 'hung', since: '2026-11-27T03:10:00Z' }),
    fleetJob({
      key: 'e',
      program: 'e',
      state: 'hung',
      since: '2026-11-27T01:00:00Z',
      endedAt: '2026-11-27T03:40:00Z',
    }),
  ];
  it('by state: hung first (longest hung first), then waiting, not sampled, computing, progressing; ended last', () => {
    expect(sortFleetJobs(jobs, 'state').map((j) => j.key)).toEqual(['h1', 'h2', 'w', 'u', 'c', 'p', 'e']);
  });
  it('by since: the longest in its state first, jobs without a time last', () => {
    expect(sortFleetJobs(jobs, 'since').map((j) => j.key)).toEqual(['e', 'c', 'p', 'h1', 'h2', 'w', 'u']);
  });
  it('leaves the input alone', () => {
    const keys = jobs.map((j) => j.key);
    sortFleetJobs(jobs, 'state');
    expect(jobs.map((j) => j.key)).toEqual(keys);
  });
});

describe('history', () => {
  const sample = (at: string, state: WatchState): ApiFleetSample => ({ at, state, snapshotId: null });
  it('says the samples in words, the last 24 only', () => {
    expect(historyText([], NOW, UTC)).toBe('no samples yet');
    expect(
      historyText(
        [
          sample('2026-11-27T03:01:00Z', 'waiting'),
          sample('2026-11-27T03:03:00Z', 'hung'),
          sample('2026-11-27T03:05:00Z', 'hung'),
        ],
        NOW,
        UTC,
      ),
    ).toBe('last 3 samples: 03:01 AM waiting, 03:03 AM hung, 03:05 AM hung');
    const many = Array.from({ length: 30 }, (_, i) =>
      sample(`2026-11-27T03:${String(i).padStart(2, '0')}:00Z`, 'progressing'),
    );
    const text = historyText(many, NOW, UTC);
    expect(text.startsWith('last 24 samples: 03:06 AM progressing,')).toBe(true);
    expect(text.endsWith('03:29 AM progressing')).toBe(true);
  });
});

describe('the policy', () => {
  it('in one sentence, on or off', () => {
    expect(policyText(DEFAULT_WATCH_POLICY)).toBe('The hang watch is off: no job is sampled.');
    expect(
      policyText({ ...DEFAULT_WATCH_POLICY, enabled: true, users: ['alice', 'bob'], partitions: ['debug'] }),
    ).toBe(
      'The hang watch samples only jobs of users alice, bob; partition debug every 180 s; a job blocked in MPI ' +
        'with nothing moving over 3 samples is called hung; each rank is stopped at most 1,000 ms per hour.',
    );
    expect(policyText({ ...DEFAULT_WATCH_POLICY, enabled: true, programs: ['/scratch/proj/'] })).toMatch(
      /^The hang watch samples only jobs of program \/scratch\/proj\/ every 180 s;/,
    );
    expect(policyText({ ...DEFAULT_WATCH_POLICY, enabled: true })).toMatch(
      /^The hang watch samples every job every 180 s;/,
    );
  });

  it('form: reads back what it showed, the cores setting included (saving never drops it)', () => {
    const p = {
      ...DEFAULT_WATCH_POLICY,
      enabled: true,
      users: ['alice'],
      accounts: ['a1', 'a2'],
      captureCores: true,
    };
    expect(parsePolicyFields(policyFields(p))).toEqual({ ok: true, policy: p });
    const off = parsePolicyFields(policyFields(DEFAULT_WATCH_POLICY));
    expect(off.ok && off.policy.captureCores).toBe(false);
  });

  it('form: programs read back as a list, and an empty field leaves them out (every program)', () => {
    const p = {
      ...DEFAULT_WATCH_POLICY,
      enabled: true,
      programs: ['/scratch/proj/', 'lammps'],
      captureCores: false,
    };
    expect(policyFields(p).programs).toBe('/scratch/proj/, lammps');
    expect(parsePolicyFields(policyFields(p))).toEqual({ ok: true, policy: p });
    const none = parsePolicyFields({ ...policyFields(p), programs: ' ' });
    expect(none.ok && none.policy).not.toHaveProperty('programs');
    const long = parsePolicyFields({ ...policyFields(p), programs: `/${'x'.repeat(128)}` });
    expect(long.ok ? null : long.errors.programs).toBe('Programs: a name has at most 128 characters.');
  });

  it('form: names split on commas and spaces, duplicates dropped', () => {
    const r = parsePolicyFields({
      ...policyFields(DEFAULT_WATCH_POLICY),
      users: ' alice, bob  carol,,alice ',
    });
    expect(r.ok && r.policy.users).toEqual(['alice', 'bob', 'carol']);
  });

  it("form: refuses each field outside the spec's limits, saying which and why", () => {
    const r = parsePolicyFields({
      ...policyFields(DEFAULT_WATCH_POLICY),
      periodSeconds: '0',
      hungAfterSamples: '1',
      stopBudgetMsPerRankHour: 'lots',
      partitions: 'x'.repeat(129),
    });
    expect(r).toEqual({
      ok: false,
      errors: {
        periodSeconds: 'The sample period must be from 1 to 86,400 s; 0 is not.',
        hungAfterSamples: 'Hung after must be from 2 to 1,000 samples; 1 is not.',
        stopBudgetMsPerRankHour: 'The stop budget must be a whole number from 0 to 3,600,000 ms.',
        partitions: 'Partitions: a name has at most 128 characters.',
      },
    });
    const r2 = parsePolicyFields({ ...policyFields(DEFAULT_WATCH_POLICY), periodSeconds: '2.5' });
    expect(r2.ok ? null : r2.errors.periodSeconds).toBe(
      'The sample period must be a whole number from 1 to 86,400 s.',
    );
    const r3 = parsePolicyFields({
      ...policyFields(DEFAULT_WATCH_POLICY),
      periodSeconds: ' 2 ',
      hungAfterSamples: '2',
    });
    expect(r3.ok && [r3.policy.periodSeconds, r3.policy.hungAfterSamples]).toEqual([2, 2]);
  });

  it('cores: where the watch kept them, and which nodes kept none and why', () => {
    expect(coresText({})).toBeNull();
    expect(coresText({ cores: null })).toBeNull();
    const at = '2026-11-27T03:00:00.000Z';
    const rank = (r: number, error: string | null) => ({
      rank: r,
      host: r < 2 ? 'node1' : 'node2',
      core: error === null ? `rank-${r}.core` : null,
      bytes: error === null ? 1000 : 0,
      error,
    });
    expect(
      coresText({
        cores: {
          at,
          episodeStart: at,
          dirs: [
            { host: 'node1', dir: '/cores/w', error: null },
            { host: 'node2', dir: null, error: 'MQD_E_CORE_DIR_FORBIDDEN: no core directory' },
          ],
          ranks: [rank(0, null), rank(1, null), rank(2, 'no dir'), rank(3, 'no dir')],
        },
      }),
    ).toBe(
      'cores kept: 2 of 4 ranks in node1:/cores/w; none on node2 (MQD_E_CORE_DIR_FORBIDDEN: no core directory)',
    );
  });
});
