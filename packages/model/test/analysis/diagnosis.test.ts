// The diagnosis in concrete facts (diagnosis.ts) over real snapshots recorded from MPI jobs with
// stacks: the tags and the user's source lines each rank waits at, read from the recorded frames
// and the fixture's source, never written into the product.
import {
  type DiagnosisLine,
  explainSnapshot,
  type Frame,
  isRuntimeFrame,
  type JobSnapshot,
  userFrame,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { fixtureSource, GOLDEN_MPIS, golden } from '../golden.js';

/** The line of the fixture's own source file on the rank's main thread, from the recorded frames. */
function sourceLine(s: JobSnapshot, rank: number, file: string): number {
  const frames = s.ranks.find((r) => r.rank === rank)?.threads?.find((t) => t.main)?.frames ?? [];
  const f = frames.find((x) => x.file?.endsWith(`/${file}`) || x.file === file);
  if (f?.line === null || f?.line === undefined) throw new Error(`no ${file} frame on rank ${rank}`);
  return f.line;
}

/** The text of that line of a fixture's source. */
const sourceText = (file: string, line: number) => fixtureSource(file).split('\n')[line - 1] ?? '';

const lineFor = (lines: readonly DiagnosisLine[], ranks: string) => lines.find((l) => l.ranks === ranks);

describe('the diagnosis names tags and source lines (real golden snapshots)', () => {
  it.each(GOLDEN_MPIS)('%s wrong_tag: rank 0 waits for tag 99, rank 1 for tag 1, each at its line', (mpi) => {
    const s = golden(mpi, 'wrong_tag');
    const l0 = sourceLine(s, 0, 'wrong_tag.c');
    const l1 = sourceLine(s, 1, 'wrong_tag.c');
    // The recorded frames point at the receives of the fixture: 99 from rank 1, 1 from rank 0.
    expect(sourceText('wrong_tag.c', l0)).toMatch(/MPI_Recv\(.*, 1, 99,/);
    expect(sourceText('wrong_tag.c', l1)).toMatch(/MPI_Recv\(.*, 0, 1,/);
    const d = explainSnapshot(s).diagnosis;
    expect(d.cycle?.text).toBe(
      `Cycle: rank 0 waits for rank 1 (tag 99, wrong_tag.c:${l0}) / rank 1 waits for rank 0 (tag 1, :${l1})`,
    );
    expect(lineFor(d.groups, '0')?.text).toBe(
      `Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:${l0} in main`,
    );
    expect(lineFor(d.groups, '1-3')?.text).toBe(
      `Ranks 1-3 wait in MPI_Recv for a message from rank 0, tag 1, on MPI_COMM_WORLD, at wrong_tag.c:${l1} in main`,
    );
    // Every rank and frame it names is a place: rank 0's link opens its frame in wrong_tag.c.
    const rank0 = d.cycle?.parts.find((p) => p.kind === 'rank' && p.rank === 0);
    const main0 = s.ranks[0]?.threads?.find((t) => t.main);
    expect(rank0?.kind === 'rank' ? rank0.frame : null).toEqual({ tid: main0?.tid, index: 1 });
    expect(main0?.frames[1]?.line).toBe(l0);
    const frameLinks = d.cycle?.parts.filter((p) => p.kind === 'frame').map((p) => p.text);
    expect(frameLinks).toEqual([`wrong_tag.c:${l0}`, `:${l1}`]);
    const cells = d.cycle?.parts.filter((p) => p.kind === 'cell');
    // Rank 0 receives from 1: the message's cell is sender row 1, receiver column 0.
    expect(cells).toEqual([
      { kind: 'cell', text: 'tag 99', row: 1, col: 0 },
      { kind: 'cell', text: 'tag 1', row: 0, col: 1 },
    ]);
  });

  it.each(GOLDEN_MPIS)('%s ring_ssend: every rank sends to the next, at the Ssend line', (mpi) => {
    const s = golden(mpi, 'ring_ssend');
    const l = sourceLine(s, 0, 'ring_ssend.c');
    expect(sourceText('ring_ssend.c', l)).toContain('MPI_Ssend');
    const d = explainSnapshot(s).diagnosis;
    expect(d.groups.map((g) => g.text)).toEqual([
      `Ranks 0-3 wait in MPI_Ssend to send to the next rank, tag 42, on MPI_COMM_WORLD, at ring_ssend.c:${l} in main`,
    ]);
    expect(d.cycle?.text).toMatch(
      /^Cycle: rank 0 waits for rank 1 \(tag 42, ring_ssend\.c:\d+\) \/ rank 1 waits/,
    );
  });

  it.each(GOLDEN_MPIS)(
    '%s collective_mismatch: three in the barrier wait for rank 3, which receives',
    (mpi) => {
      const s = golden(mpi, 'collective_mismatch');
      const lb = sourceLine(s, 0, 'collective_mismatch.c');
      const lr = sourceLine(s, 3, 'collective_mismatch.c');
      expect(sourceText('collective_mismatch.c', lb)).toContain('MPI_Barrier');
      expect(sourceText('collective_mismatch.c', lr)).toContain('MPI_Recv');
      const d = explainSnapshot(s).diagnosis;
      expect(d.groups.map((g) => g.text)).toEqual([
        `Ranks 0-2 wait in MPI_Barrier on MPI_COMM_WORLD for rank 3, at collective_mismatch.c:${lb} in main; rank 3 never entered it: it is in MPI_Recv at collective_mismatch.c:${lr}`,
        `Rank 3 waits in MPI_Recv for a message from any rank, tag 1234, on MPI_COMM_WORLD, at collective_mismatch.c:${lr} in main`,
      ]);
    },
  );

  it('no internal token in any text a person reads', () => {
    for (const mpi of GOLDEN_MPIS) {
      for (const f of ['wrong_tag', 'ring_ssend', 'collective_mismatch'] as const) {
        const e = explainSnapshot(golden(mpi, f));
        const texts = [e.summary, e.diagnosis.cycle?.text ?? '', ...e.diagnosis.groups.map((g) => g.text)];
        for (const t of texts)
          expect(t).not.toMatch(
            /\(\d+ (call|receive|send)\)|collective-call|wildcard-receive|_in_call|wait_barrier/,
          );
      }
    }
  });
});

describe('the user frame: the innermost frame outside MPI and its runtime', () => {
  const frame = (fn: string | null, module: string | null, file: string | null = null): Frame => ({
    pc: '0x1',
    function: fn,
    module,
    file,
    line: file === null ? null : 10,
    inlined: false,
  });

  it('knows MPICH, Open MPI, UCX, PMIx and libc frames by module or by name', () => {
    for (const [fn, mod] of [
      ['internal_Recv', null],
      ['PMPI_Recv', null],
      ['MPIR_Wait_impl', null],
      ['MPIDI_progress_test', null],
      ['MPID_Progress_wait', null],
      ['ompi_request_default_wait', null],
      ['mca_pml_ob1_recv', null],
      ['opal_progress', null],
      ['pmix_ptl_base_recv', null],
      ['ucp_worker_progress', null],
      ['__libc_start_call_main', null],
      ['poll', null],
      ['anything', '/opt/mpich/lib/libmpi.so.12.2.2'],
      ['anything', '/usr/lib/x86_64-linux-gnu/libc.so.6'],
      ['anything', '/opt/ucx/lib/libucp.so.0'],
      ['anything', '/opt/openmpi/lib/libopen-pal.so.40'],
    ] as const) {
      expect(isRuntimeFrame(frame(fn, mod)), `${fn} ${mod}`).toBe(true);
    }
    for (const fn of ['main', 'solve', 'exchange_halo', 'read_input']) {
      expect(isRuntimeFrame(frame(fn, '/home/u/app')), fn).toBe(false);
    }
  });

  it('skips MPICH inlined internals to the user line on the thread in the call', () => {
    const s = golden('mpichch4', 'wrong_tag');
    const r = s.ranks[1];
    if (r === undefined) throw new Error('rank 1 missing');
    const t = r.threads?.[0];
    const withInternals = {
      ...r,
      threads: [
        {
          ...(t as NonNullable<typeof t>),
          frames: [
            frame('MPIDI_progress_test', null, 'ch4_progress.c'),
            frame('internal_Recv', '/opt/mpich/lib/libmpi.so.12', 'recv.c'),
            ...(t?.frames ?? []),
          ],
        },
      ],
    };
    const u = userFrame(withInternals);
    expect(u?.frame.function).toBe('main');
    expect(u?.index).toBe(3);
  });
});
