// The rank view's first sentence (rank-detail.ts rankSentence: the diagnosis's own facts for one
// rank) and the places its source excerpts are read for, over real golden snapshots.
import {
  excerptLines,
  isRuntimeFrame,
  libraryCaveats,
  rankComms,
  rankSentence,
  sourcePlaces,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { GOLDEN_MPIS, golden } from '../golden.js';

describe('rank detail (real golden snapshots)', () => {
  it.each(GOLDEN_MPIS)(
    '%s wrong_tag: the sentence names the call, peer, tag, communicator and line',
    (mpi) => {
      const s = golden(mpi, 'wrong_tag');
      const l0 = rankSentence(s, 0);
      expect(l0?.text).toMatch(
        /^Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag\.c:36 in main$/,
      );
      expect(l0?.parts.find((p) => p.kind === 'frame')).toMatchObject({ rank: 0, text: 'wrong_tag.c:36' });
      expect(rankSentence(s, 1)?.text).toMatch(
        /^Rank 1 waits in MPI_Recv for a message from rank 0, tag 1, .* at wrong_tag\.c:47 in main$/,
      );
      expect(rankSentence(s, 99)).toBeNull();
      // One place per rank here: the main thread's user frame; no runtime thread's file.
      const r0 = s.ranks.find((r) => r.rank === 0);
      expect(r0 && sourcePlaces(r0).map((p) => [p.file.replace(/.*\//, ''), p.line])).toEqual([
        ['wrong_tag.c', 36],
      ]);
    },
  );

  it("Open MPI's plugins (mca_*.so) are the runtime's, not the user's code", () => {
    expect(
      isRuntimeFrame({ function: 'progress_engine', module: '/opt/openmpi/lib/openmpi/mca_pmix_pmix3x.so' }),
    ).toBe(true);
    expect(isRuntimeFrame({ function: 'tool_main', module: '/home/u/bin/mca_tool' })).toBe(false);
  });

  it('shows a line as text with the tricks visible and tabs expanded', () => {
    const e = { file: '/x.c', line: 2, first: 1, lines: ['\tint a;', 'x = 1; /* \u202e evil */'] };
    expect(excerptLines(e)).toEqual([
      { no: 1, text: '        int a;', current: false },
      { no: 2, text: 'x = 1; /* \\u202E evil */', current: true },
    ]);
  });

  it("folds the library's quiet communicators, keeps the world first", () => {
    const m = golden('mpich', 'wrong_tag');
    const m0 = m.ranks[0];
    if (m0 === undefined) throw new Error('no rank 0');
    const { shown, folded } = rankComms(m0);
    expect(shown.map((c) => c.name)).toEqual(['MPI_COMM_WORLD']);
    expect(folded.map((c) => c.name)).toContain('MPI_COMM_SELF');
  });

  it('no ucx caveat on a job whose queues hold entries, even when the stacks name no PML', () => {
    // The golden stacks are cut below the MPI call: no mca_pml_* frame; rank 0 has posted receives.
    expect(libraryCaveats(golden('openmpi', 'wrong_tag')).join(' ')).not.toMatch(/ucx/);
  });
});
