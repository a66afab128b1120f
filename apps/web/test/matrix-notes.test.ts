import { explainSnapshot, mqdError, rankMarks, rankNotRead, syntheticStacksJob } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { rankNotes } from '../src/matrix/rank-notes.js';
import { factsOfSnapshot } from '../src/snapshot-facts.js';
import { fourRanks } from './fixtures.js';

describe('what the matrix marks beside the queues', () => {
  it('flags exactly the ranks whose queues were not read', () => {
    const snap = fourRanks();
    const dropped = rankNotRead(
      { rank: 2, pid: 102, host: 'n2' },
      mqdError('MQD_E_AGENT_MISSING', 'the agent on n2 is gone'),
      'agent-missing',
    );
    const notes = rankNotes(
      factsOfSnapshot({ ...snap, ranks: snap.ranks.map((r) => (r.rank === 2 ? dropped : r)) }).notRead,
      4,
      null,
    );
    expect(Array.from(notes.notRead ?? [])).toEqual([0, 0, 1, 0]);
    expect(rankNotes(factsOfSnapshot(snap).notRead, 4, null).notRead).toBeNull();
  });

  it("marks a collective's odd rank out with why, for the axis and the tooltip", () => {
    const snap = syntheticStacksJob({ ranks: 8, scenario: 'collective-mismatch' });
    const e = explainSnapshot(snap);
    const notes = rankNotes([], 8, rankMarks(e));
    expect(notes.oddOut).toEqual([7]);
    expect(notes.why.get(7)?.[0]).toMatch(
      /^odd rank out: rank 7 in MPI_Allreduce .* while ranks 0-6 in MPI_Barrier/,
    );
  });
});
