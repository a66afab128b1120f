// The mpi4py call a Python rank's line makes, named beside the MPI call it is in ("MPI_Recv
// (comm.recv)"): read from the line's own text (the rank's source excerpt), as the method call
// on that line whose name is the MPI call's (`recv`, `Recv` for MPI_Recv). mpi4py's pickling
// `recv` probes for the message first, so a rank in MPI_Mprobe or MPI_Probe names `recv` too.

import type { UserFrame } from '../mpi/frames.js';
import type { JobSnapshot, RankSnapshot, SourceExcerpt } from '../snapshot-spec.js';

/** MPI calls that a method of another name makes. */
const ALSO: Readonly<Record<string, readonly string[]>> = {
  MPI_Mprobe: ['recv'],
  MPI_Probe: ['recv'],
  MPI_Mrecv: ['recv'],
};

const METHOD_CALL = /([A-Za-z_][\w.]*)\.([A-Za-z_]\w*)\s*\(/g;

/** Each host's excerpts by file and line, once per snapshot (an excerpt travels once per host). */
const excerpts = new WeakMap<JobSnapshot, Map<string, SourceExcerpt>>();

/** The text of the line the user frame is at, from the rank's excerpt or one of its host's. */
function lineText(snap: JobSnapshot, r: RankSnapshot, file: string, line: number): string | null {
  let m = excerpts.get(snap);
  if (m === undefined) {
    m = new Map();
    for (const x of snap.ranks) {
      for (const e of x.sources ?? []) {
        const k = `${x.host}\u0000${e.line}\u0000${e.file}`;
        if (!m.has(k)) m.set(k, e);
      }
    }
    excerpts.set(snap, m);
  }
  const e = m.get(`${r.host}\u0000${line}\u0000${file}`);
  if (e === undefined || !('lines' in e)) return null;
  return e.lines[line - e.first] ?? null;
}

/**
 * "comm.recv" when the user frame is a Python frame whose line calls the method that makes `mpiFn`;
 * null otherwise (a C frame, no excerpt, or no such call on the line).
 */
export function pythonCallOf(
  snap: JobSnapshot,
  r: RankSnapshot,
  user: UserFrame,
  mpiFn: string,
): string | null {
  const { file, line, module } = user.frame;
  if (module !== null || file === null || line === null || !file.endsWith('.py')) return null;
  const text = lineText(snap, r, file, line);
  if (text === null) return null;
  const base = mpiFn.replace(/^P?MPI_/, '').toLowerCase();
  const names = new Set([base, ...(ALSO[mpiFn] ?? [])]);
  for (const m of text.matchAll(METHOD_CALL)) {
    const method = m[2] ?? '';
    if (names.has(method.toLowerCase())) return `${m[1]}.${method}`;
  }
  return null;
}
