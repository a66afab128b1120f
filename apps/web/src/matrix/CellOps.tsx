// The operations behind one matrix cell (or block, or strip segment): a linear scan of the
// edge table, capped, identical operations of one rank's queue one row with their count
// (groupEntries), each row linking to the matching order of the rank that holds it.
import {
  groupEntries,
  isWildcardPeer,
  notReadNote,
  opGroupKey,
  peerGlobalRank,
  positionsText,
  QUEUE_LABEL,
  snapshotReadStatus,
} from '@mqd/model';
import { useMemo } from 'react';
import type { LoadedSnapshot } from '../data.js';
import { commLabel, formatCount, formatOpSize, formatOpStatus, formatPeer, formatTag } from '../format.js';

import { KindSwatch } from '../ui.js';
import type { SetUrl } from '../view-types.js';
import { anySenderLabel, anySenderText } from './cell-text.js';
import {
  ANY_PEER,
  anySenderSplit,
  type CellRange,
  type CompiledFilter,
  type EdgeTable,
  edgesInCell,
  KIND_OF_INDEX,
} from './edges.js';
import { KIND_COLOR } from './palette.js';
import './cell-ops.css';

/** Operations scanned; identical ones are grouped, so this is far more than the rows drawn. */
const LIMIT = 100_000;
/** Rows (groups of identical operations) drawn. */
const ROWS = 500;

function rangeLabel(start: number, size: number, n: number, any: string): string {
  if (start === ANY_PEER) return any;
  const end = Math.min(n, start + size) - 1;
  return end <= start ? `rank ${start}` : `ranks ${start}–${end}`;
}

export function CellOps({
  data,
  edges,
  filter,
  cell,
  setUrl,
}: {
  data: LoadedSnapshot;
  edges: EdgeTable;
  filter: CompiledFilter;
  cell: CellRange;
  setUrl: SetUrl;
}) {
  const snapshot = data.snapshot;
  const { indices, total } = useMemo(() => edgesInCell(edges, filter, cell, LIMIT), [edges, filter, cell]);
  // The any-sender strip holds two things: receives from MPI_ANY_SOURCE and senders unknown.
  const split = useMemo(
    () => (cell.row === ANY_PEER ? anySenderSplit(edges, filter, cell) : null),
    [edges, filter, cell],
  );
  const sum = (a: readonly number[]) => a.reduce((x, y) => x + y, 0);
  const unit = snapshot.mpi.lengthUnit;
  const n = edges.worldSize;
  // Each listed operation with where it is, grouped: same queue of the same rank and communicator, same entry.
  const groups = useMemo(() => {
    const ops = indices.flatMap((i) => {
      const rank = snapshot.ranks[edges.owner[i] ?? 0];
      const comm = rank?.communicators[edges.commPos[i] ?? 0];
      const kind = KIND_OF_INDEX[edges.kind[i] ?? 0] ?? 'sends';
      const pos = edges.opPos[i] ?? 0;
      const op = comm?.[kind]?.[pos];
      return rank && comm && op ? [{ i, rank, comm, kind, pos, op }] : [];
    });
    return groupEntries(
      ops,
      (o) => `${o.kind}\u0000${o.rank.rank}\u0000${o.comm.id}\u0000${opGroupKey(o.op)}`,
    );
  }, [indices, snapshot, edges]);
  const rows = groups.slice(0, ROWS);
  // Ranks of the cell's rows or columns whose queues were not read: their part is unknown.
  const unread = useMemo(() => {
    const inside = (r: number, start: number) => start !== ANY_PEER && r >= start && r < start + cell.size;
    const ranks = snapshot.ranks.filter(
      (r) => r.state.kind !== 'ok' && (inside(r.rank, cell.row) || inside(r.rank, cell.col)),
    );
    return ranks.length === 0 ? null : notReadNote(snapshotReadStatus({ ranks }));
  }, [snapshot, cell]);
  return (
    <div className="cell-ops" data-testid="cell-ops">
      <header className="cell-ops-head">
        <h3>
          {rangeLabel(
            cell.row,
            cell.size,
            n,
            split ? anySenderLabel(sum(split.wildcard), sum(split.unknown)) : 'unknown sender',
          )}{' '}
          → {rangeLabel(cell.col, cell.size, n, 'unknown receiver')}
        </h3>
        <button
          type="button"
          onClick={() => setUrl({ cell: null }, 'replace')}
          title="Clear the selection (Esc)"
        >
          Close
        </button>
      </header>
      <p className="muted">
        {formatCount(total)} operation{total === 1 ? '' : 's'}
        {groups.length < indices.length && `, ${formatCount(groups.length)} distinct`}
        {total > indices.length && `; the first ${formatCount(indices.length)} listed`}
        {groups.length > rows.length && `; the first ${formatCount(rows.length)} kinds shown`}
      </p>
      {split && total > 0 && (
        <p data-testid="cell-any-split">{anySenderText(split.wildcard, split.unknown)}</p>
      )}
      {unread && (
        <p className="not-read-note" role="note" data-testid="cell-not-read">
          <span className="swatch hatch" aria-hidden="true" /> {unread}: what their queues hold is unknown,
          not empty.
        </p>
      )}
      {indices.length === 0 ? (
        <p className="empty">
          {unread ? 'No operations known here.' : 'No operations here with the current filters.'}
        </p>
      ) : (
        <div className="cell-ops-table">
          <table className="ops compact">
            <thead>
              <tr>
                <th>Queue</th>
                <th>Count</th>
                <th title="The process whose queue holds the operation">On rank</th>
                <th>Peer</th>
                <th>Tag</th>
                <th>Size</th>
                <th>Comm.</th>
                <th>#</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((g) => {
                const { i, rank, comm, kind, op } = g.first;
                const peer = peerGlobalRank(op.peer, comm, rank.rank, n);
                return (
                  <tr
                    key={g.key}
                    data-testid="cell-op-row"
                    data-count={g.count}
                    className="clickable"
                    onClick={() => setUrl({ view: 'order', rank: rank.rank, rcomm: comm.id })}
                    title={`${QUEUE_LABEL[kind]} of rank ${rank.rank}: open its matching order`}
                  >
                    <td>
                      <KindSwatch color={KIND_COLOR[kind]} />{' '}
                      {kind === 'sends' ? 'send' : kind === 'receives' ? 'recv' : 'unexp'}
                      {(op.status !== 'pending' || op.corrected !== undefined) && (
                        <span className="badge">{formatOpStatus(op)}</span>
                      )}
                    </td>
                    <td>{g.count === 1 ? '1' : `${formatCount(g.count)} ×`}</td>
                    <td>{rank.rank}</td>
                    <td
                      className={op.peer.local === null ? 'wild' : ''}
                      data-peer={isWildcardPeer(op.peer) ? 'any' : peer === null ? 'unknown' : 'rank'}
                    >
                      {formatPeer(op, peer)}
                    </td>
                    <td className={op.tag === null ? 'wild' : ''}>{formatTag(op.tag)}</td>
                    <td>{formatOpSize(op, unit)}</td>
                    <td className="comm">{commLabel(comm)}</td>
                    <td data-op={i}>
                      {positionsText(
                        g.items.map((o) => o.pos),
                        2,
                      ).replace(/#/g, '')}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
