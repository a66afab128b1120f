// The human-readable form of a snapshot for `mqd snapshot` (JSON is --json).
import {
  type Communicator,
  type JobSnapshot,
  type LengthUnit,
  type Operation,
  opLengthUnit,
  QUEUE_KINDS,
  type QueueKind,
  type RankSnapshot,
} from '@mqd/model';

const LIB: Record<JobSnapshot['mpi']['library'], string> = {
  openmpi: 'Open MPI',
  mpich: 'MPICH',
  unknown: 'unknown MPI',
};

function who(op: Operation): string {
  if (op.peer.local === null) return 'ANY';
  return op.peer.global !== null && op.peer.global !== op.peer.local
    ? `${op.peer.local} (world ${op.peer.global})`
    : String(op.peer.local);
}

/** `unit` is the snapshot's; an operation in another unit (MPICH ch4's unexpected messages) prints its own. */
function opLine(kind: QueueKind, op: Operation, unit: LengthUnit): string {
  const arrow = kind === 'sends' ? 'to' : 'from';
  const tag = op.tag === null ? 'ANY' : String(op.tag);
  const extra = op.extraText.length ? `  [${op.extraText.join('; ')}]` : '';
  const len = op.lengthUnknown ? '?' : String(op.length);
  // The rank's note says why (RankSnapshot.statusCorrections).
  const status = op.corrected === undefined ? op.status : `${op.status} (corrected)`;
  return `${arrow} ${who(op).padEnd(6)} tag ${tag.padEnd(6)} ${len} ${opLengthUnit(op, unit)}  ${status}${extra}`;
}

function dllText(d: NonNullable<RankSnapshot['dll']>): string {
  return d.version ? `${d.path} (${d.version})` : d.path;
}

/**
 * What the DLL's field lookups said about its fit with the library (RankSnapshot.dll): fields
 * the library's debug info lacks (a DLL built for another version: its entries may be wrong),
 * and renamed fields it was given at their new place. No lines when neither.
 */
function dllFieldLines(d: NonNullable<RankSnapshot['dll']>, indent: string): string[] {
  const out: string[] = [];
  if (d.missingFields?.length) {
    out.push(
      `${indent}DLL fields missing from the MPI library's debug info (queue entries may be wrong): ${d.missingFields.join(', ')}`,
    );
  }
  if (d.renamedFields?.length) {
    out.push(`${indent}DLL fields read at their new place in the library: ${d.renamedFields.join(', ')}`);
  }
  return out;
}

function isEmpty(c: Communicator): boolean {
  return (c.sends?.length ?? 0) + (c.receives?.length ?? 0) + (c.unexpected?.length ?? 0) === 0;
}

export function formatSnapshot(s: JobSnapshot, opts: { all?: boolean } = {}): string {
  const out: string[] = [];
  const unit = s.mpi.lengthUnit;
  // The DLL each rank was read by (RankSnapshot.dll): one line when they all agree, else per
  // rank (an MPMD job of two MPI builds).
  const dlls = new Set(s.ranks.flatMap((r) => (r.dll ? [dllText(r.dll)] : [])));
  const oneDll = dlls.size === 1 ? [...dlls][0] : undefined;
  const header = oneDll ?? s.mpi.dll;
  // The field notes follow the same rule: under the job's DLL line when every rank read by it
  // has the same ones, else under each rank.
  const notes = new Set(s.ranks.flatMap((r) => (r.dll ? [dllFieldLines(r.dll, '').join('\n')] : [])));
  const jobNotes = oneDll !== undefined && notes.size === 1;
  out.push(
    `${LIB[s.mpi.library]} job, ${s.ranks.length} rank(s), taken ${s.takenAt} in ${(s.durationMicros / 1000).toFixed(1)} ms` +
      (header ? `\nDLL: ${header}` : ''),
  );
  const firstDll = s.ranks.find((r) => r.dll)?.dll;
  if (jobNotes && firstDll) out.push(...dllFieldLines(firstDll, '  '));
  if (s.source?.kind === 'core') {
    out.push(`read from ${s.source.cores.length} core file(s), not from running processes:`);
    for (const c of s.source.cores) {
      const why = c.signal === 0 ? 'captured' : `signal ${c.signal}`;
      out.push(`  rank ${c.rank}: ${c.path} (pid ${c.pid}, ${why}, written ${c.writtenAt})`);
    }
  }
  for (const u of s.unidentified ?? []) {
    out.push(`\nnot a rank: pid ${u.pid}  host ${u.host}  ${u.error.message}`);
  }
  for (const r of s.ranks) {
    const state = r.state.kind === 'ok' ? 'ok' : `${r.state.kind}: ${r.state.message}`;
    const paused =
      r.pausedMicros === null || s.source ? '' : `  stopped ${(r.pausedMicros / 1000).toFixed(2)} ms`;
    out.push(`\nrank ${r.rank}  pid ${r.pid}  host ${r.host}  ${state}${paused}`);
    if (r.dll && dlls.size > 1) out.push(`  DLL: ${dllText(r.dll)}`, ...dllFieldLines(r.dll, '    '));
    else if (r.dll && !jobNotes) out.push(...dllFieldLines(r.dll, '  '));
    for (const n of r.statusCorrections ?? []) {
      out.push(`  ${n.count} status(es) corrected: ${n.message}`);
    }
    let hidden = 0;
    for (const c of r.communicators) {
      if (
        !opts.all &&
        isEmpty(c) &&
        (c.name === '' || c.name === '--unnamed--' || c.name === 'MPI_COMM_SELF')
      ) {
        hidden++;
        continue;
      }
      const fortran = typeof c.fortranHandle === 'number' ? `  fortran ${c.fortranHandle}` : '';
      out.push(`  ${c.name || '(unnamed)'}  id ${c.id}${fortran}  size ${c.size}  local rank ${c.localRank}`);
      for (const q of QUEUE_KINDS) {
        const ops = c[q];
        if (ops === null) {
          out.push(
            `    ${q}: not shown (${c.unavailable[q]?.message.split(':')[1]?.trim() ?? 'unsupported'})`,
          );
          continue;
        }
        if (ops.length === 0) continue;
        out.push(`    ${q} (${ops.length}):`);
        for (const op of ops) out.push(`      ${opLine(q, op, unit)}`);
      }
      if (isEmpty(c) && Object.keys(c.unavailable).length === 0) out.push('    (no pending operations)');
    }
    if (hidden) out.push(`  (${hidden} empty internal communicator(s) hidden; --all shows them)`);
  }
  return out.join('\n');
}
