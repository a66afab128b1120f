// The rank view marks a thread's MPI frames with the model's rule (mpi/frames.ts): the public
// MPI_X / PMPI_X and MPICH 4's `internal_X` binding frames of the MPI library, which stand for
// MPI_X when PMPI_X tail-called them; a user's own `internal_X` is not MPI's.
import { type Frame, type JobSnapshot, syntheticRingDeadlock } from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { localSnapshot } from '../src/data.js';
import { RankView } from '../src/rank/RankView.js';
import { DEFAULT_STATE } from '../src/url-state.js';

const frame = (fn: string, module: string, pc: number): Frame => ({
  pc: `0x${pc.toString(16)}`,
  function: fn,
  module,
  file: null,
  line: null,
  inlined: false,
});

function withStack(frames: Frame[]): JobSnapshot {
  const s = syntheticRingDeadlock({ ranks: 2 });
  return {
    ...s,
    ranks: s.ranks.map((r) =>
      r.rank !== 0
        ? r
        : { ...r, threads: [{ tid: 100, name: 'app', main: true, frames, truncated: false, error: null }] },
    ),
  };
}

/** Each frame row's function and whether it is marked as MPI's. */
function marks(snapshot: JobSnapshot): [string, boolean][] {
  const html = renderToStaticMarkup(
    createElement(RankView, {
      api: {} as Api,
      url: { ...DEFAULT_STATE, view: 'rank', rank: 0 },
      setUrl: () => {},
      data: localSnapshot('frames', snapshot, true),
    }),
  );
  return [
    ...html.matchAll(/<tr class="([^"]*)"[^>]*><td>\d+<\/td><td class="fn"[^>]*><bdi>([^<]*)<\/bdi>/g),
  ].map((m) => [m[2] ?? '', (m[1] ?? '').split(' ').includes('mpi')]);
}

describe('MPI frames in the rank view', () => {
  it("marks MPICH's internal_X frames of the MPI library, not a user's internal_X", () => {
    const lib = '/usr/lib/x86_64-linux-gnu/libmpich.so.12';
    const app = '/home/u/a.out';
    expect(
      marks(
        withStack([
          frame('MPIDI_progress_test', lib, 1),
          frame('internal_Waitall', lib, 2),
          frame('internal_Solve', app, 3),
          frame('PMPI_Barrier', lib, 4),
          frame('main', app, 5),
        ]),
      ),
    ).toEqual([
      ['MPIDI_progress_test', false],
      ['internal_Waitall', true],
      ['internal_Solve', false],
      ['PMPI_Barrier', true],
      ['main', false],
    ]);
  });
});
