// What a message matrix can mark of a deadlock's cycles, and what it cannot. A wait edge names
// one cell (sender row, receiver column: edgeCell), except a receive from MPI_ANY_SOURCE: its
// queue entry has no sender, so it sits in the matrix's "any sender" strip under the receiver's
// column, and outlining the cell of one possible sender would outline an empty cell. Waits
// inside a collective are no message between two ranks and have no cell at all.
import { ranksPhrase } from '../text.js';
import { commPhrase, describeCallGroup } from './call-facts.js';
import type { Explanation } from './explain.js';
import { type DeadlockCycle, edgeCell } from './wait-graph.js';

export interface CycleMarks {
  /** Cells (sender row, receiver column) of the cycles' message edges, at most `maxCells`. */
  readonly cells: { readonly row: number; readonly col: number }[];
  /** Receivers whose cycle edge is a receive from MPI_ANY_SOURCE (their column of the any-sender strip). */
  readonly anySource: number[];
  /** Edges inside a collective: in the cycles, but on no cell. */
  readonly collectiveEdges: number;
  /** Cycles whose edges are marked, and the cycles the analysis found (it keeps at most 100). */
  readonly cyclesMarked: number;
  readonly cycleTotal: number;
  /** Cells were left out because there were more than `maxCells`. */
  readonly cellsCut: boolean;
}

/** At most this many cells are outlined by default (a 16,384-rank ring has 16,384). */
export const MAX_CYCLE_CELLS = 20_000;

export function cycleMarks(
  cycles: readonly DeadlockCycle[],
  cycleTotal: number,
  maxCells = MAX_CYCLE_CELLS,
): CycleMarks {
  const cells: { row: number; col: number }[] = [];
  const anySource = new Set<number>();
  let collectiveEdges = 0;
  let cyclesMarked = 0;
  let cellsCut = false;
  for (const c of cycles) {
    if (cells.length >= maxCells) {
      cellsCut = true;
      break;
    }
    cyclesMarked++;
    for (const edge of c.edges) {
      if (edge.ops.length > 0 && edge.ops.every((o) => o.evidence === 'wildcard-receive')) {
        anySource.add(edge.from);
        continue;
      }
      const cell = edgeCell(edge);
      if (cell === null) collectiveEdges++;
      else if (cells.length < maxCells) cells.push(cell);
      else cellsCut = true;
    }
  }
  return {
    cells,
    anySource: [...anySource].sort((a, b) => a - b),
    collectiveEdges,
    cyclesMarked,
    cycleTotal: Math.max(cycleTotal, cycles.length),
    cellsCut,
  };
}

/** Ranks a view marks on its rank axes, with why in words. */
export interface RankMark {
  /** As ranges ("3,7-9"). */
  readonly ranks: string;
  readonly why: string;
}

export interface RankMarks {
  /**
   * Odd ranks out: members of a communicator in another call than the largest group of its
   * members inside a collective on it, and ranks others wait for inside a collective that show
   * no collective traffic themselves (late to it).
   */
  readonly oddOut: RankMark[];
  /** Ranks whose queue shape at most 1% of the job shares (classes.ts), as ranges; "" when none. */
  readonly outliers: string;
}

export function rankMarks(
  e: Pick<Explanation, 'collectiveMismatches' | 'collectives' | 'outliers'>,
): RankMarks {
  const oddOut: RankMark[] = [];
  for (const m of e.collectiveMismatches) {
    const [main, ...rest] = m.groups;
    if (!main) continue;
    for (const g of rest) {
      // Ranks whose stacks were not read prove nothing either way: not odd, unknown.
      if (g.where === 'unread') continue;
      oddOut.push({ ranks: g.ranks, why: `${describeCallGroup(g)} while ${describeCallGroup(main)}` });
    }
  }
  for (const c of e.collectives) {
    if (c.waitingFor === '') continue;
    oddOut.push({
      ranks: c.waitingFor,
      why: `${ranksPhrase(c.waitingFor)} awaited inside the collective on ${commPhrase(c.commName)} but not in it`,
    });
  }
  return { oddOut, outliers: e.outliers };
}
