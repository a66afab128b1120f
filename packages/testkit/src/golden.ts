// Golden snapshots: real snapshots of the fixtures, recorded from every real MPI build
// (fixtures/golden/<mpi>/: Open MPI 4.1.4, MPICH 4.0.2, Open MPI 5.0.7; MPICH 4.2.1 once it is
// built) by apps/cli/test/golden.mpi.test.ts (`UPDATE_GOLDEN=1` to re-record), normalised so they
// do not depend on the machine or the run, and committed under fixtures/golden/. The unit
// project runs the analysis, the CLI's text and the API over them without starting MPI.
//
// Normalised: pids (10000 + rank), thread ids (pid, then pid + 1, 2, ... in listed order),
// host, times, pause lengths; addresses (buffers, extra texts, MPICH's communicator ids) renumbered in order
// of first appearance over the whole snapshot, so equal addresses stay equal; install paths
// (the MPI cache, this checkout) replaced by fixed names; frame pcs zeroed. Stacks keep only the
// thread inside the MPI call and the main thread, and the MPI-call thread only from the public
// call outward: what is inside the library's progress engine differs from stop to stop.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { foldMpiName, type JobSnapshot, type RankSnapshot, type ThreadStack } from '@mqd/model';
import { ALL_MPI_NAMES, type AnyMpiName, mpiCacheDir } from './config.js';
import { HANG_FIXTURES } from './expected-queues.js';

export const GOLDEN_DIR: string = fileURLToPath(new URL('../../../fixtures/golden/', import.meta.url));
const REPO_ROOT: string = fileURLToPath(new URL('../../../', import.meta.url));

/** The fixtures recorded: every hang fixture and the stack fixtures (not the debuglink copy). */
export const GOLDEN_FIXTURES: readonly string[] = [
  ...HANG_FIXTURES,
  'collective_two',
  'ssend_complete_ring',
  'probe_wait',
  'thread_multiple',
  'cpp_ring',
];

export const GOLDEN_TIME = '2026-01-01T00:00:00.000Z';
/** Where the normalised snapshot sees the MPI builds and this checkout. */
export const GOLDEN_MPI_ROOT = '/opt/mqd-mpi';
export const GOLDEN_REPO_ROOT = '/src/mqd';

export function goldenFile(mpi: AnyMpiName, fixture: string, ext: 'snapshot.json' | 'txt'): string {
  return join(GOLDEN_DIR, mpi, `${fixture}.${ext}`);
}

/** Every recorded golden snapshot, as [mpi, fixture] pairs (a build never recorded has none). */
export function listGolden(): Array<[AnyMpiName, string]> {
  const out: Array<[AnyMpiName, string]> = [];
  for (const mpi of ALL_MPI_NAMES) {
    const dir = join(GOLDEN_DIR, mpi);
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir).sort()) {
      if (f.endsWith('.snapshot.json')) out.push([mpi, f.slice(0, -'.snapshot.json'.length)]);
    }
  }
  return out;
}

const ADDRESS = /^0x[0-9a-f]+$/;

/**
 * A DLL's version string without what differs between two builds of the same source: Open MPI
 * names the user@host that built it, MPICH the day it was compiled.
 */
export function buildNeutral(version: string): string {
  return version
    .replace(/package: Open MPI \S+ Distribution/, 'package: Open MPI (builder) Distribution')
    .replace(/compiled on [A-Z][a-z]{2} +\d{1,2} \d{4}/, 'compiled on (build date)');
}

function pathOf(p: string | null, roots: ReadonlyArray<readonly [string, string]>): string | null {
  if (p === null) return null;
  for (const [from, to] of roots) if (p.startsWith(from)) return to + p.slice(from.length);
  return p;
}

function trimThreads(r: RankSnapshot): ThreadStack[] | undefined {
  if (r.threads === undefined) return undefined;
  const call = r.mpiCall ?? null;
  return r.threads
    .filter((t) => t.main || (call !== null && t.tid === call.tid))
    .map((t) => {
      if (call === null || t.tid !== call.tid) return t;
      let outer = -1;
      t.frames.forEach((f, i) => {
        if (f.function !== null && foldMpiName(f.function) === call.function) outer = i;
      });
      if (outer < 0) return t;
      const kept = t.frames.slice(outer);
      // A progress loop inlined into the public call (MPICH ch4: MPIDI_progress_test inside
      // PMPI_Mprobe) puts the call's own frame wherever the loop was stopped: its line is then
      // not a property of the job. (ch3's inlined internal_Recv calls a progress function that
      // is not inlined, so PMPI_Recv's line stays the call site and is kept.)
      const [callFrame, ...rest] = kept;
      let i = outer - 1;
      let inlinedProgress = false;
      for (; i >= 0 && t.frames[i]?.inlined === true; i--)
        if (/progress/i.test(t.frames[i]?.function ?? '')) inlinedProgress = true;
      // A probe (MPI_Probe, MPI_Mprobe) is itself a polling loop in every library: MPICH 4.2.1's
      // PMPI_Mprobe holds it whole, stopped at its iprobe call or inside its inlined progress
      // test, so the call frame's line is never a property of the job there either.
      if (callFrame && (inlinedProgress || /^MPI_M?[Pp]robe$/.test(call.function)))
        return { ...t, frames: [{ ...callFrame, file: null, line: null }, ...rest] };
      return { ...t, frames: kept };
    });
}

export function normaliseSnapshot(s: JobSnapshot, mpiRoot: string = mpiCacheDir()): JobSnapshot {
  const addresses = new Map<string, string>();
  const address = (a: string): string => {
    if (a === '0x0' || !ADDRESS.test(a)) return a;
    let n = addresses.get(a);
    if (n === undefined) {
      n = `0x${(0x1000 + addresses.size * 0x10).toString(16)}`;
      addresses.set(a, n);
    }
    return n;
  };
  // MPICH names communicators by address (hex or decimal); Open MPI by small context ids.
  // The DLLs also print addresses in an operation's extra text ("Receive: 0x55...").
  const text = (t: string): string => t.replace(/0x[0-9a-f]{5,16}/g, address);
  const op = <O extends { buffer: string; extraText: string[] }>(o: O): O => ({
    ...o,
    buffer: address(o.buffer),
    extraText: o.extraText.map(text),
  });
  const commId = (id: string): string =>
    ADDRESS.test(id) ? address(id) : /^\d{6,}$/.test(id) ? address(`0x${BigInt(id).toString(16)}`) : id;
  const roots = [
    [mpiRoot.endsWith('/') ? mpiRoot : `${mpiRoot}/`, `${GOLDEN_MPI_ROOT}/`],
    [REPO_ROOT, `${GOLDEN_REPO_ROOT}/`],
  ] as const;
  const ranks = s.ranks.map((r): RankSnapshot => {
    const pid = 10_000 + r.rank;
    const tids = new Map<number, number>();
    const threads = trimThreads(r);
    (r.threads ?? []).forEach((t, i) => {
      tids.set(t.tid, t.tid === r.pid ? pid : pid + 1 + i);
    });
    const tid = (t: number) => tids.get(t) ?? pid;
    const out: RankSnapshot = {
      ...r,
      ...(r.dll
        ? { dll: { path: pathOf(r.dll.path, roots) ?? r.dll.path, version: buildNeutral(r.dll.version) } }
        : {}),
      pid,
      host: 'node0',
      pausedMicros: r.pausedMicros === null ? null : 100,
      communicators: r.communicators.map((c) => ({
        ...c,
        id: commId(c.id),
        sends: c.sends?.map(op) ?? null,
        receives: c.receives?.map(op) ?? null,
        unexpected: c.unexpected?.map(op) ?? null,
      })),
    };
    if (r.state.kind !== 'ok') {
      out.state = { ...r.state, message: r.state.message.replaceAll(String(r.pid), String(pid)) };
    }
    if (r.queueSource) {
      const byPid = (m: string) => m.replaceAll(`pid ${r.pid}`, `pid ${pid}`);
      out.queueSource = {
        ...r.queueSource,
        library: pathOf(r.queueSource.library, roots) ?? r.queueSource.library,
        limits: r.queueSource.limits.map((l) => ({ ...l, message: byPid(l.message) })),
      };
    }
    // Source excerpts are this checkout's fixture text at its path: checked against the fixture
    // by packages/mqd-core/test/source-excerpts.mpi.test.ts, not recorded.
    delete out.sources;
    if (threads !== undefined) {
      out.threads = threads.map((t) => ({
        ...t,
        tid: tid(t.tid),
        frames: t.frames.map((f) => ({
          ...f,
          pc: '0x0',
          module: pathOf(f.module, roots),
          file: pathOf(f.file, roots),
        })),
      }));
    }
    if (r.mpiCall) {
      const a = r.mpiCall.args;
      out.mpiCall = {
        ...r.mpiCall,
        tid: tid(r.mpiCall.tid),
        args:
          a === null ? null : { ...a, communicator: a.communicator === null ? null : commId(a.communicator) },
      };
    }
    return out;
  });
  return {
    ...s,
    takenAt: GOLDEN_TIME,
    durationMicros: 1000,
    mpi: { ...s.mpi, dll: pathOf(s.mpi.dll, roots) },
    ranks,
  };
}
