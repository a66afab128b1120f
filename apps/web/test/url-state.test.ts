import { JobId, SnapshotId } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { ANY_PEER } from '../src/matrix-types.js';
import {
  DEFAULT_STATE,
  formatUrl,
  jobNeedingLatest,
  latestSnapshot,
  parseUrl,
  shareLinkOf,
  shareStateOf,
  type UrlState,
  urlOf,
  VIEW_KEYS,
} from '../src/url-state.js';

const roundTrip = (s: UrlState) => {
  const { pathname, search } = formatUrl(s);
  return parseUrl(pathname, search);
};

describe('URL state', () => {
  it('leaves defaults out of the URL', () => {
    expect(urlOf(DEFAULT_STATE)).toBe('/');
    expect(parseUrl('/', '')).toEqual(DEFAULT_STATE);
  });

  it('round-trips every key', () => {
    const s: UrlState = {
      view: 'order',
      share: null,
      job: JobId('job-7'),
      snap: SnapshotId('s 42/x'),
      value: 'bytes',
      comm: 'name:MPI_COMM_WORLD',
      tag: -5,
      kinds: ['sends', 'unexpected'],
      ranks: '0-2,5,7-9',
      sq: 'MPI_Bar',
      threads: 'all',
      snode: 12,
      sby: 'function',
      srt: true,
      cell: { row: ANY_PEER, col: 256, size: 32 },
      zoom: { k: 12.5, x: -0.25, y: -3.125 },
      rank: 8191,
      rcomm: '0x44000000',
      frame: '20001:3',
      tkind: 'receives',
      fsort: 'since',
      jq: 'ring alice',
      auto: true,
      ev: [
        { expr: 'st->prog->step', frame: 'solve' },
        { expr: 'a[0:4]', frame: null },
      ],
      demo: 4096,
      scenario: 'wrong-tag',
    };
    expect(roundTrip(s)).toEqual(s);
    expect(formatUrl(roundTrip(s))).toEqual(formatUrl(s));
  });

  it('keeps a selected frame of the rank view and drops a malformed one', () => {
    const s: UrlState = { ...DEFAULT_STATE, view: 'rank', rank: 0, frame: '10000:1' };
    expect(urlOf(s)).toBe('/?view=rank&rank=0&frame=10000%3A1');
    expect(roundTrip(s)).toEqual(s);
    expect(parseUrl('/', '?view=rank&frame=1:x').frame).toBeNull();
  });

  it('round-trips the stacks view (key s) and drops malformed rank ranges', () => {
    const s: UrlState = { ...DEFAULT_STATE, view: 'stacks', ranks: '0-3', sq: 'Allreduce', snode: 4 };
    expect(urlOf(s)).toBe('/?view=stacks&ranks=0-3&sq=Allreduce&snode=4');
    expect(roundTrip(s)).toEqual(s);
    expect(VIEW_KEYS['s']).toBe('stacks');
    expect(parseUrl('/', '?view=stacks&ranks=0-3;drop').ranks).toBeNull();
    expect(parseUrl('/', '?threads=bogus').threads).toBe('main');
  });

  it('round-trips the fleet view, reached by the f key', () => {
    const s: UrlState = { ...DEFAULT_STATE, view: 'fleet' };
    expect(urlOf(s)).toBe('/?view=fleet');
    expect(parseUrl('/', '?view=fleet')).toEqual(s);
    expect(roundTrip({ ...s, job: JobId('j1'), auto: true })).toEqual({ ...s, job: JobId('j1'), auto: true });
    expect(VIEW_KEYS['f']).toBe('fleet');
    expect(parseUrl('/', '?view=Fleet').view).toBe('jobs');
    // Its order: hung first by default (left out), or by how long each job has been in its state.
    expect(urlOf({ ...s, fsort: 'since' })).toBe('/?view=fleet&fsort=since');
    expect(parseUrl('/', '?view=fleet&fsort=bogus').fsort).toBe('state');
  });

  it('opens a share link on the matrix, read-only state in the path', () => {
    const s = parseUrl('/s/AbC_12-x', '?rank=3');
    expect(s.share).toBe('AbC_12-x');
    expect(s.view).toBe('matrix');
    expect(s.rank).toBe(3);
    expect(urlOf(s)).toBe('/s/AbC_12-x?rank=3');
    expect(roundTrip({ ...s, view: 'rank' })).toEqual({ ...s, view: 'rank' });
  });

  it('a share link keeps the view, its filters, selection and zoom; the live ids stay behind', () => {
    const live = parseUrl(
      '/',
      '?view=stacks&job=j7&snap=s9&sq=allreduce&threads=all&snode=12&ranks=63&comm=c%231&tag=5&kinds=sends&z=2,0.1,0.2&auto=1',
    );
    const link = shareLinkOf(live, { id: 'AbC', url: '/s/AbC' }, 'http://mqd.example:8080');
    const u = new URL(link);
    expect(u.origin).toBe('http://mqd.example:8080');
    const opened = parseUrl(u.pathname, u.search);
    expect(opened).toEqual({ ...live, share: 'AbC', job: null, snap: null, auto: false });
    // Views a share does not have open the matrix.
    const fromJobs = new URL(
      shareLinkOf({ ...live, view: 'jobs' }, { id: 'AbC', url: '/s/AbC' }, 'http://h'),
    );
    expect(parseUrl(fromJobs.pathname, fromJobs.search).view).toBe('matrix');
    expect(shareStateOf({ ...live, view: 'fleet' }, 'AbC').view).toBe('matrix');
    expect(shareStateOf({ ...live, view: 'timeline' }, 'AbC').view).toBe('timeline');
  });

  it('falls back to defaults for malformed values', () => {
    const s = parseUrl(
      '/s/../etc',
      '?view=nope&value=kB&tag=1.5&kinds=foo&cell=1,2&z=0,1,1&rank=-1&demo=0&auto=yes',
    );
    expect(s).toEqual(DEFAULT_STATE);
  });

  it('keeps a partial kind list in canonical order', () => {
    const s = parseUrl('/', '?kinds=unexpected,receives,bogus');
    expect(s.kinds).toEqual(['receives', 'unexpected']);
    expect(urlOf(s)).toBe('/?kinds=receives%2Cunexpected');
  });

  it('shortens zoom numbers without moving the view by more than a millionth', () => {
    const s = {
      ...DEFAULT_STATE,
      view: 'matrix' as const,
      zoom: { k: Math.PI, x: -0.123456789, y: 0 },
    };
    const back = roundTrip(s).zoom;
    expect(back?.k).toBeCloseTo(Math.PI, 5);
    expect(back?.x).toBeCloseTo(-0.123457, 6);
  });
});

describe('a link with a job and no snapshot', () => {
  it("asks for the job's latest snapshot when the view shows one", () => {
    expect(jobNeedingLatest(parseUrl('/', '?view=matrix&job=7'))).toBe(JobId('7'));
    expect(jobNeedingLatest(parseUrl('/', '?view=order&job=7&rank=2'))).toBe(JobId('7'));
    // Already a snapshot, a view without one, no job, a share or a demo: nothing to look up.
    expect(jobNeedingLatest(parseUrl('/', '?view=matrix&job=7&snap=3'))).toBeNull();
    expect(jobNeedingLatest(parseUrl('/', '?job=7'))).toBeNull();
    expect(jobNeedingLatest(parseUrl('/', '?view=fleet&job=7'))).toBeNull();
    expect(jobNeedingLatest(parseUrl('/', '?view=matrix'))).toBeNull();
    expect(jobNeedingLatest(parseUrl('/s/abcdef', '?view=matrix&job=7'))).toBeNull();
    expect(jobNeedingLatest(parseUrl('/', '?demo=64&view=matrix&job=7'))).toBeNull();
  });

  it('picks the latest snapshot by time taken, the first listed on a tie', () => {
    const e = (id: string, takenAt: string) => ({ id: SnapshotId(id), takenAt });
    expect(latestSnapshot([])).toBeNull();
    expect(
      latestSnapshot([
        e('a', '2026-01-01T00:01:00Z'),
        e('b', '2026-01-01T00:03:00Z'),
        e('c', '2026-01-01T00:02:00Z'),
      ])?.id,
    ).toBe('b');
    expect(latestSnapshot([e('new', '2026-01-01T00:00:00Z'), e('old', '2026-01-01T00:00:00Z')])?.id).toBe(
      'new',
    );
  });
});
