// `mqd snapshot` says when the message-queue DLL does not fit its library (RankSnapshot.dll's
// missingFields and renamedFields): under the job's DLL line when all ranks agree, else under
// each rank, as the DLL line itself is printed.
import { type JobSnapshot, type RankSnapshot, syntheticRingDeadlock } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { formatSnapshot } from '../src/format.js';

const CH4 = { path: '/opt/mpich-4.0.2/lib/libtvmpich.so', version: 'MPICH 4.0.2' };
const RENAMED = [
  'MPIDIG_req_t.rank -> MPIDIG_req_t.u.recv.source',
  'MPIDIG_req_t.tag -> MPIDIG_req_t.u.recv.tag',
];

function withDll(dll: (r: RankSnapshot) => RankSnapshot['dll']): JobSnapshot {
  const s = syntheticRingDeadlock({ ranks: 3, style: 'mpich' });
  return {
    ...s,
    ranks: s.ranks.map((r) => {
      const d = dll(r);
      const { dll: _old, ...rest } = r;
      return d === undefined ? rest : { ...rest, dll: d };
    }),
  };
}

const lines = (text: string, re: RegExp) => text.split('\n').filter((l) => re.test(l));

describe('DLL field notes in the snapshot text', () => {
  it('prints both lists once, under the job DLL line, when every rank agrees', () => {
    const text = formatSnapshot(
      withDll(() => ({
        ...CH4,
        missingFields: ['MPIR_Request.kind', 'MPIR_Comm.rank'],
        renamedFields: RENAMED,
      })),
    );
    const all = text.split('\n');
    const at = all.indexOf(`DLL: ${CH4.path} (${CH4.version})`);
    expect(at).toBeGreaterThan(0);
    expect(all.slice(at + 1, at + 3)).toEqual([
      "  DLL fields missing from the MPI library's debug info (queue entries may be wrong): MPIR_Request.kind, MPIR_Comm.rank",
      `  DLL fields read at their new place in the library: ${RENAMED.join(', ')}`,
    ]);
    expect(lines(text, /DLL fields/)).toHaveLength(2);
  });

  it('prints nothing more when the DLL fits its library', () => {
    const text = formatSnapshot(withDll(() => ({ ...CH4 })));
    expect(text).toContain(`DLL: ${CH4.path}`);
    expect(text).not.toContain('DLL fields');
  });

  it('prints the notes under each rank when the ranks were read by different DLLs', () => {
    const other = { path: '/opt/ompi/lib/openmpi/libompi_dbg_msgq.so', version: 'Open MPI 4.1.4' };
    const text = formatSnapshot(
      withDll((r) => (r.rank === 1 ? { ...other, missingFields: ['mca_pml_base_request_t.req_tag'] } : CH4)),
    );
    const all = text.split('\n');
    const rank1 = all.findIndex((l) => l.startsWith('rank 1 '));
    expect(all.slice(rank1 + 1, rank1 + 3)).toEqual([
      `  DLL: ${other.path} (${other.version})`,
      "    DLL fields missing from the MPI library's debug info (queue entries may be wrong): mca_pml_base_request_t.req_tag",
    ]);
    expect(lines(text, /DLL fields/)).toHaveLength(1);
  });

  it('prints the notes under each rank when one DLL gave different notes on different ranks', () => {
    const text = formatSnapshot(withDll((r) => (r.rank === 2 ? { ...CH4, renamedFields: RENAMED } : CH4)));
    const all = text.split('\n');
    const rank2 = all.findIndex((l) => l.startsWith('rank 2 '));
    expect(all[rank2 + 1]).toBe(`  DLL fields read at their new place in the library: ${RENAMED.join(', ')}`);
    expect(lines(text, /DLL fields/)).toHaveLength(1);
    expect(lines(text, /^DLL: /)).toHaveLength(1);
  });
});

describe('the unit of each length in the snapshot text', () => {
  /** An MPICH ring (lengths in elements) whose unexpected messages are ch4's: 16 bytes each. */
  function ch4Ring(): JobSnapshot {
    const s = withDll(() => ({ ...CH4, renamedFields: RENAMED }));
    for (const r of s.ranks)
      for (const c of r.communicators)
        c.unexpected =
          c.unexpected?.map((op) => ({ ...op, length: 16, lengthUnit: 'bytes' as const })) ?? null;
    return s;
  }

  it("prints an operation's own unit where it differs from the snapshot's", () => {
    const s = ch4Ring();
    expect(s.mpi.lengthUnit).toBe('elements');
    const text = formatSnapshot(s);
    const unexpected = lines(text, /^ {6}from .* tag .* bytes /);
    const count = s.ranks.reduce(
      (n, r) => n + r.communicators.reduce((m, c) => m + (c.unexpected?.length ?? 0), 0),
      0,
    );
    expect(count).toBeGreaterThan(0);
    expect(unexpected).toHaveLength(count);
    for (const l of unexpected) expect(l).toMatch(/ 16 bytes {2}\w+$/);
    // Every other length is still in the snapshot's unit.
    expect(lines(text, /^ {6}(to|from) /).filter((l) => !/ bytes /.test(l)).length).toBeGreaterThan(0);
    for (const l of lines(text, /^ {6}(to|from) /)) expect(l).toMatch(/ (\d+|\?) (elements|bytes) {2}/);
  });

  it("prints the snapshot's unit when an operation has none", () => {
    const text = formatSnapshot(withDll(() => CH4));
    const ops = lines(text, /^ {6}(to|from) /);
    expect(ops.length).toBeGreaterThan(0);
    for (const l of ops) expect(l).toMatch(/ \d+ elements {2}/);
  });
});
