// CPython frames of REAL hung mpi4py jobs (Debian's python3 3.11 and python3-mpi4py on the debug
// Open MPI 4.1.4 build), read in the same stop as the queues and the C stacks: each rank's
// Python function, file and line are the fixture's own (its `# MQD_LINE` markers), the frames
// of one evaluation loop end at its entry frame, and a rank computing in a pure-Python loop
// shows the loop's lines while the others wait in MPI_Recv; a second thread in MPI_Recv has its
// own Python frames beside the computing main thread's. The rank sentence and the stack tree
// name the Python line (and the mpi4py call), the source excerpt is the .py file's.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  buildStackTree,
  excerptLines,
  formatStackTree,
  type JobSnapshot,
  type Pid,
  type RankSnapshot,
  rankSentence,
  sourceExcerptFor,
  sourcePlaces,
  type ThreadStack,
  validateSnapshot,
} from '@mqd/model';
import {
  done,
  markerLine,
  mpi4pyInstalled,
  mpiAvailable,
  PYTHON_FIXTURES,
  pending,
  pythonLaunch,
  rankBlockedIn,
  waitFor,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';

const rig = fixtureRig();
const ready = mpiAvailable('openmpi') && mpi4pyInstalled();

async function snap(pids: readonly number[]): Promise<JobSnapshot> {
  const { snapshot } = await rig.snapshotter.snapshot(pids.map((pid) => ({ pid })));
  const valid = validateSnapshot(snapshot);
  expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
  return snapshot;
}

/** Waits until a thread of the rank is inside MPI_Recv (for jobs launched with waitFor 'ready'). */
async function untilInRecv(pid: Pid): Promise<void> {
  await waitFor(
    async () => {
      const c = await rankBlockedIn(pid, 'MPI_Recv', true);
      return c.blocked ? done(true) : pending(c.error ?? 'not in MPI_Recv yet');
    },
    { timeoutMs: 30_000, what: `pid ${pid} to block in MPI_Recv` },
  );
}

function mainThread(r: RankSnapshot): ThreadStack {
  const t = r.threads?.find((x) => x.main);
  if (!t) throw new Error(`rank ${r.rank}: no main thread (${JSON.stringify(r.stacksError)})`);
  return t;
}

/** The main thread's Python frames as `function@file:line`, innermost first. */
function pyFrames(r: RankSnapshot): string[] {
  return (mainThread(r).python?.frames ?? []).map(
    (f) => `${f.function}@${f.file.split('/').pop()}:${f.line}`,
  );
}

describe.skipIf(!ready)('Python frames of mpi4py ranks (Open MPI 4.1.4)', () => {
  it('wrong_tag: every rank at its comm.recv line in wait_for_left, called from step, main, <module>', async () => {
    const job = await rig.launch(pythonLaunch('wrong_tag', 2));
    const s = await snap(job.ranks.map((r) => r.pid));
    const f = 'wrong_tag.py';
    for (const r of s.ranks) {
      expect(r.state.kind, JSON.stringify(r.state)).toBe('ok');
      expect(r.python?.version).toMatch(/^3\.11\.\d+$/);
      expect(r.python?.error ?? null).toBeNull();
      expect(r.mpiCall?.function).toBe('MPI_Recv');
      expect(pyFrames(r)).toEqual([
        `wait_for_left@${f}:${markerLine('wrong_tag', 'recv')}`,
        `step@${f}:${markerLine('wrong_tag', 'step')}`,
        `main@${f}:${markerLine('wrong_tag', 'main')}`,
        `<module>@${f}:${markerLine('wrong_tag', 'main') + 3}`,
      ]);
      const t = mainThread(r);
      expect(t.python?.frames[0]?.file).toBe(join(PYTHON_FIXTURES, 'wrong_tag.py'));
      // One entry frame per run of the evaluation loop on the C stack (3.11 runs Python-to-Python
      // calls in the same C frame).
      const evalFrames = t.frames.filter((x) => x.function === '_PyEval_EvalFrameDefault').length;
      expect(t.python?.frames.filter((x) => x.entry).length).toBe(evalFrames);
      expect(t.python?.frames.at(-1)?.entry).toBe(true);
      // The other threads (Open MPI's progress threads) have no Python thread state.
      for (const other of r.threads ?? []) if (!other.main) expect(other.python).toBeUndefined();
    }
    // The rank's sentence names the Python line, the stack tree has the Python frames in place
    // of the interpreter's, right above the MPI call (mpi4py's wrappers folded into it).
    const recv = markerLine('wrong_tag', 'recv');
    expect(rankSentence(s, 0)?.text).toBe(
      `Rank 0 waits in MPI_Recv (comm.recv) for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.py:${recv} in wait_for_left`,
    );
    const tree = formatStackTree(buildStackTree(s, { by: 'line' }), { modules: true }).split('\n');
    const at = tree.findIndex((l) => l.trim() === `[0-1] (2) wait_for_left at wrong_tag.py:${recv}`);
    expect(at, tree.join('\n')).toBeGreaterThan(0);
    expect(tree[at - 1]?.trim()).toBe(`[0-1] (2) step at wrong_tag.py:${markerLine('wrong_tag', 'step')}`);
    expect(tree[at + 1]?.trim()).toMatch(/^\[0-1\] \(2\) PMPI_Recv in libmpi\.so/);
    expect(tree.filter((l) => /python3\.11|mpi4py|_PyEval/.test(l))).toEqual([]);
    // The source excerpt is the .py file's, read as the owner after the resume.
    const r0 = s.ranks[0];
    if (!r0) throw new Error('no rank 0');
    const place = sourcePlaces(r0)[0];
    expect(place).toEqual({ file: join(PYTHON_FIXTURES, 'wrong_tag.py'), line: recv });
    const e = place === undefined ? null : sourceExcerptFor(s, r0, place);
    const current = e === null || 'unreadable' in e ? undefined : excerptLines(e).find((l) => l.current);
    expect(current?.text).toContain('comm.recv(buf, source=left, tag=TAG_WAITED)');
  });

  it('ring_ssend: every rank at its comm.ssend line in pass_right', async () => {
    const job = await rig.launch(pythonLaunch('ring_ssend', 2));
    const s = await snap(job.ranks.map((r) => r.pid));
    for (const r of s.ranks) {
      expect(r.mpiCall?.function).toBe('MPI_Ssend');
      expect(pyFrames(r)).toEqual([
        `pass_right@ring_ssend.py:${markerLine('ring_ssend', 'ssend')}`,
        `<module>@ring_ssend.py:${markerLine('ring_ssend', 'module')}`,
      ]);
      expect(rankSentence(s, r.rank)?.text).toMatch(
        new RegExp(
          `^Rank ${r.rank} waits in MPI_Ssend \\(comm\\.ssend\\) .*, at ring_ssend\\.py:${markerLine('ring_ssend', 'ssend')} in pass_right$`,
        ),
      );
    }
  });

  it('python_loop: rank 1 computes at a line of series or compute, rank 0 waits at its recv line', async () => {
    const job = await rig.launch(pythonLaunch('python_loop', 2, { waitFor: 'ready' }));
    const waiter = job.ranks.find((r) => r.rank === 0);
    if (waiter) await untilInRecv(waiter.pid);
    // Rank 1 printed its READY line before its loop: the snapshot is taken once it is inside.
    const s = await waitFor(
      async () => {
        const x = await snap(job.ranks.map((r) => r.pid));
        const inner = x.ranks[1] ? pyFrames(x.ranks[1])[0] : undefined;
        return /^(series|compute)@/.test(inner ?? '') ? done(x) : pending(`rank 1 at ${inner}`);
      },
      { timeoutMs: 30_000, what: 'rank 1 to compute in its loop' },
    );
    const [r0, r1] = s.ranks;
    if (!r0 || !r1) throw new Error('two ranks expected');
    expect(pyFrames(r0)).toEqual([
      `main@python_loop.py:${markerLine('python_loop', 'wait')}`,
      `<module>@python_loop.py:${markerLine('python_loop', 'wait') + 3}`,
    ]);
    expect(r1.mpiCall).toBeNull();
    const frames = pyFrames(r1);
    const compute = `compute@python_loop.py:${markerLine('python_loop', 'compute')}`;
    // Between the loop's own lines: inside series (called from compute), or in compute itself.
    const inner = frames[0] ?? '';
    const series = (mainThread(r1).python?.frames[0]?.line ?? 0) - markerLine('python_loop', 'series');
    if (inner.startsWith('series@')) {
      expect(Math.abs(series)).toBeLessThanOrEqual(2);
      expect(frames[1]).toBe(compute);
    } else {
      expect(inner.startsWith('compute@')).toBe(true);
    }
    expect(frames.at(-2)).toMatch(/^main@python_loop\.py:\d+$/);
    expect(frames.at(-1)).toMatch(/^<module>@python_loop\.py:\d+$/);
    // The computing rank's sentence names its Python line, not the interpreter's C function.
    expect(rankSentence(s, 1)?.text).toMatch(/at python_loop\.py:\d+ in (series|compute)$/);
  });

  it('thread_recv: the listener thread waits at its recv line while the main thread computes', async () => {
    const job = await rig.launch(pythonLaunch('thread_recv', 2, { waitFor: 'ready' }));
    for (const r of job.ranks) await untilInRecv(r.pid);
    const s = await snap(job.ranks.map((r) => r.pid));
    for (const r of s.ranks) {
      const call = r.mpiCall;
      expect(call?.function).toBe('MPI_Recv');
      const listener = r.threads?.find((t) => t.tid === call?.tid);
      expect(listener?.main).toBe(false);
      // Python's own thread bootstrap frames are outside the target's: only listen is the script's.
      const own = (listener?.python?.frames ?? []).filter((f) => f.file.endsWith('/thread_recv.py'));
      expect(own.map((f) => `${f.function}:${f.line}`)).toEqual([
        `listen:${markerLine('thread_recv', 'listen')}`,
      ]);
      const main = (mainThread(r).python?.frames ?? []).map((f) => f.function);
      expect(main).toEqual(['crunch', 'main', '<module>']);
      const line = mainThread(r).python?.frames[0]?.line;
      expect([markerLine('thread_recv', 'crunch'), markerLine('thread_recv', 'crunch-body')]).toContain(line);
      expect(rankSentence(s, r.rank)?.text).toMatch(
        new RegExp(
          `in MPI_Recv \\(comm\\.recv\\) .*, at thread_recv\\.py:${markerLine('thread_recv', 'listen')} in listen$`,
        ),
      );
    }
  });

  it('collective_mismatch: comm.barrier() against comm.Allreduce(), each at its own line', async () => {
    const job = await rig.launch(pythonLaunch('collective_mismatch', 3));
    const s = await snap(job.ranks.map((r) => r.pid));
    for (const r of s.ranks) {
      const last = r.rank === 2;
      const tag = last ? 'allreduce' : 'barrier';
      expect(r.mpiCall?.function).toBe(last ? 'MPI_Allreduce' : 'MPI_Barrier');
      expect(pyFrames(r)).toEqual([
        `sync@collective_mismatch.py:${markerLine('collective_mismatch', tag)}`,
        `<module>@collective_mismatch.py:${markerLine('collective_mismatch', 'module')}`,
      ]);
      const call = last ? 'MPI_Allreduce \\(comm\\.Allreduce\\)' : 'MPI_Barrier \\(comm\\.barrier\\)';
      expect(rankSentence(s, r.rank)?.text).toMatch(
        new RegExp(
          `^Rank ${r.rank} waits in ${call}.*at collective_mismatch\\.py:${markerLine('collective_mismatch', tag)} in sync\\b`,
        ),
      );
      // The barrier's ranks are told where the last rank is instead: its Allreduce line.
      if (!last)
        expect(rankSentence(s, r.rank)?.text).toContain(
          `it is in MPI_Allreduce at collective_mismatch.py:${markerLine('collective_mismatch', 'allreduce')}`,
        );
    }
  });

  it("wrong_tag from captured cores: the same Python frames as the live read, from the cores' memory", async () => {
    const job = await rig.launch(pythonLaunch('wrong_tag', 2));
    const live = await snap(job.ranks.map((r) => r.pid));
    const dir = mkdtempSync(join(tmpdir(), 'mqd-python-cores-'));
    try {
      const { captured } = await rig.snapshotter.capture(
        job.ranks.map((r) => ({ pid: r.pid, rank: r.rank })),
        dir,
      );
      expect(captured.map((c) => ('core' in c ? c.rank : c.error.message))).toEqual([0, 1]);
      // The job is gone before the cores are read: nothing can come from the live processes.
      await job.dispose();
      const { snapshot } = await rig.snapshotter.snapshotCores(
        job.ranks.map((r) => ({ path: join(dir, `rank-${r.rank}.core`) })),
      );
      expect(snapshot.source?.kind).toBe('core');
      for (const r of snapshot.ranks) {
        const l = live.ranks.find((x) => x.rank === r.rank);
        if (!l) throw new Error(`rank ${r.rank} not in the live snapshot`);
        expect(r.python).toEqual(l.python);
        expect(pyFrames(r)).toEqual(pyFrames(l));
        expect(pyFrames(r)[0]).toBe(`wait_for_left@wrong_tag.py:${markerLine('wrong_tag', 'recv')}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
