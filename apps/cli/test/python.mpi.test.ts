// `mqd snapshot --attach PID --explain --stacks` on a real hung mpi4py job (Debian's python3 and
// python3-mpi4py on the debug Open MPI 4.1.4 build): the merged stacks show the Python frames in
// place of the interpreter's, right above the MPI call, and the diagnosis names the Python line.
// The CLI from its sources, as a user runs it.
import {
  disposeAll,
  type FixtureJob,
  launchFixture,
  markerLine,
  mpi4pyInstalled,
  mpiAvailable,
  pythonLaunch,
} from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { mqdSource } from './run-mqd.js';

let job: FixtureJob | null = null;
afterEach(async () => {
  await job?.dispose();
  job = null;
});
afterAll(() => disposeAll());

describe.skipIf(!(mpiAvailable('openmpi') && mpi4pyInstalled()))('mqd snapshot on an mpi4py job', () => {
  it('wrong_tag: the stacks show wait_for_left at its recv line over MPI_Recv, the diagnosis names the line', async () => {
    job = await launchFixture(pythonLaunch('wrong_tag', 2));
    const r = await mqdSource(['snapshot', '--attach', String(job.starterPid), '--explain', '--stacks']);
    expect(r.code, r.err).toBe(0);
    const recv = markerLine('wrong_tag', 'recv');
    const step = markerLine('wrong_tag', 'step');
    const lines = r.out.split('\n').map((l) => l.trim());
    const at = lines.indexOf(`[0-1] (2) wait_for_left at wrong_tag.py:${recv}`);
    expect(at, r.out).toBeGreaterThan(0);
    expect(lines[at - 1]).toBe(`[0-1] (2) step at wrong_tag.py:${step}`);
    expect(lines[at - 2]).toBe(`[0-1] (2) main at wrong_tag.py:${markerLine('wrong_tag', 'main')}`);
    expect(lines[at + 1]).toMatch(/^\[0-1\] \(2\) PMPI_Recv\b/);
    // The interpreter's glue and mpi4py's wrappers are folded out of the stacks.
    expect(lines.filter((l) => /_PyEval|PyObject_Vectorcall|__pyx_/.test(l))).toEqual([]);
    // The diagnosis names the Python call and line (both ranks are at the same one: one sentence).
    expect(lines).toContain(
      `Ranks 0-1 wait in MPI_Recv (comm.recv) for a message from the next rank, tag 99, on MPI_COMM_WORLD, at wrong_tag.py:${recv} in wait_for_left`,
    );
    expect(lines).toContain(
      `Cycle: rank 0 waits for rank 1 (tag 99, wrong_tag.py:${recv}) / rank 1 waits for rank 0 (tag 99, :${recv})`,
    );
  });
});
