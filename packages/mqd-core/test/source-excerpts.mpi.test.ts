// Source excerpts on a real hung job: wrong_tag's rank 0 waits in MPI_Recv at
// wrong_tag.c:36; the reader, after the stop, reads the lines around it from the file the
// executable's line table names, and a rank at the same place of the same host borrows the
// excerpt an earlier rank carries instead of repeating it.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { excerptLines, sourceExcerptFor, sourcePlaces, validateSnapshot } from '@mqd/model';
import { type AnyMpiName, mpiMatrix } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const SOURCE = fileURLToPath(new URL('../../../fixtures/mpi/wrong_tag.c', import.meta.url));
const line = (n: number) => readFileSync(SOURCE, 'utf8').split('\n')[n - 1] ?? '';

// One build: the excerpt is read from the fixture's own line table and source file, which no MPI
// library touches; the frames it starts from are stacks.mpi.test.ts's, under every
// build. Open MPI 4.1.4: its ranks have runtime threads (PMIx, progress) that must carry no excerpt.
const BUILDS = mpiMatrix().filter((m): m is AnyMpiName => m === 'openmpi');

describe.each(BUILDS)('%s: wrong_tag source excerpts', (mpi) => {
  it("rank 0's excerpt holds line 36's text, rank 1's line 47's, each file:line given once", async () => {
    expect(line(36)).toContain('MPI_Recv(buf, 4, MPI_INT, 1, 99, MPI_COMM_WORLD');
    const job = await rig.launch({ mpi, fixture: 'wrong_tag', np: 4 });
    const { snapshot } = await rig.snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })));
    const valid = validateSnapshot(snapshot);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    const at = (rankNo: number, want: number) => {
      const r = snapshot.ranks.find((x) => x.rank === rankNo);
      if (r === undefined) throw new Error(`rank ${rankNo} missing`);
      const place = sourcePlaces(r)[0];
      expect([rankNo, place?.file.endsWith('/wrong_tag.c'), place?.line]).toEqual([rankNo, true, want]);
      const e = place === undefined ? null : sourceExcerptFor(snapshot, r, place);
      expect(e === null || 'unreadable' in e ? e : 'lines').toBe('lines');
      return { r, lines: e === null ? [] : excerptLines(e) };
    };
    const r0 = at(0, 36);
    const current = r0.lines.find((l) => l.current);
    expect(current?.no).toBe(36);
    expect(current?.text).toBe(line(36));
    expect(r0.lines.length).toBe(13);
    // The main thread's line only: the runtime's threads (PMIx, progress) have no user frame.
    expect(r0.r.sources?.map((s) => s.line)).toEqual([36]);
    const r1 = at(1, 47);
    expect(r1.lines.find((l) => l.current)?.text).toBe(line(47));
    // Ranks 2 and 3 wait at line 47 too, on the same host: the excerpt travels once.
    const carriers = snapshot.ranks.filter((r) => r.sources?.some((s) => s.line === 47)).length;
    expect(carriers).toBe(1);
    at(3, 47);
  });
});
