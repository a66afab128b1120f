// Matching order of one rank and communicator: posted receives and unexpected messages in the
// order the library matches them, wildcards spelled "ANY", and per receive the messages that
// would or would not satisfy it and why, which message it takes, and its near misses. All of it
// is the model's answer (matchingOrder of @mqd/model, the engine explainSnapshot uses for its
// near misses); this view draws it. The explanation adds only its coded limits on matching.
import {
  assertUnreachable,
  type EntryGroup,
  type Explanation,
  type JobSnapshot,
  type Limit,
  MATCHING_LIMIT_CODES,
  type MatchingOrder,
  type MatchVerdict,
  matchingOrder,
  type NearMissLine,
  positionsText,
  type ReceiveNearMisses,
  type ReceiveRow,
  type SendRow,
  suggestedOrderComm,
  suggestedOrderRank,
  type UnexpectedRow,
  unavailableQueueText,
} from '@mqd/model';
import { type ReactNode, useMemo, useState } from 'react';
import { type ExplanationResult, useExplanation } from '../explanation.js';
import {
  commLabel,
  formatCount,
  formatOpSize,
  formatOpStatus,
  formatPeer,
  formatTag,
  plural,
} from '../format.js';
import { RankPicker } from '../RankPicker.js';
import { contextOf } from '../snapshot-context.js';
import { CodedText, StatusCorrections } from '../ui.js';
import type { ViewProps } from '../view-types.js';
import { nearMissWhere, nearMissWhy, reasonText, takenByText } from './order-text.js';

/** The explanation's limits that bear on matching (picked by code), or why there are none yet. */
type CaveatState =
  | { readonly kind: 'pending' }
  | { readonly kind: 'failed'; readonly message: string }
  | { readonly kind: 'ok'; readonly limits: readonly Limit[] };

function caveatState(explanation: ExplanationResult | null): CaveatState {
  if (explanation === null) return { kind: 'pending' };
  if ('failed' in explanation) return { kind: 'failed', message: explanation.failed };
  return { kind: 'ok', limits: matchingLimits(explanation) };
}

export function matchingLimits(e: Pick<Explanation, 'limits'>): Limit[] {
  return e.limits.filter((l) => MATCHING_LIMIT_CODES.includes(l.code));
}

export function OrderView({ url, setUrl, data }: ViewProps) {
  const snapshot = data.snapshot;
  const rankNo = url.rank ?? suggestedOrderRank(snapshot);
  const rank = useMemo(() => snapshot.ranks.find((r) => r.rank === rankNo) ?? null, [snapshot, rankNo]);
  const comm = rank ? suggestedOrderComm(rank, url.rcomm) : null;
  // The snapshot's one index (its context's): changing rank or communicator does not rebuild it.
  const index = contextOf(snapshot).index;
  const order = useMemo(
    () => (rank && comm ? matchingOrder(index, rank.rank, comm.id) : null),
    [index, rank, comm],
  );
  // The explanation is computed once per snapshot (../snapshot-context.ts): reused, not redone.
  const explanation = useExplanation(snapshot);
  const caveats = useMemo(() => caveatState(explanation), [explanation]);

  return (
    <div className="order-view">
      <div className="toolbar">
        <RankPicker
          snapshot={snapshot}
          rank={rankNo}
          onChange={(r) => setUrl({ rank: r, rcomm: null }, 'replace')}
        />
        {rank && rank.communicators.length > 0 && (
          <label>
            Communicator{' '}
            <select value={comm?.id ?? ''} onChange={(e) => setUrl({ rcomm: e.target.value }, 'replace')}>
              {rank.communicators.map((c) => (
                <option key={c.id} value={c.id}>
                  {commLabel(c)} (size {c.size}, rank {c.localRank} here)
                </option>
              ))}
            </select>
          </label>
        )}
        {rank && (
          <button type="button" onClick={() => setUrl({ view: 'rank', rank: rank.rank })}>
            Rank detail
          </button>
        )}
      </div>
      {!rank ? (
        <p className="empty">Rank {rankNo ?? '?'} is not in this snapshot.</p>
      ) : rank.state.kind !== 'ok' ? (
        <div className="error" role="alert">
          <CodedText error={rank.state} />
        </div>
      ) : !comm || !order ? (
        <p className="empty">Rank {rank.rank} has no communicators with queues.</p>
      ) : (
        <>
          <StatusCorrections rank={rank} />
          <OrderBody order={order} caveats={caveats} snapshot={snapshot} setUrl={setUrl} />
        </>
      )}
    </div>
  );
}

/** Groups drawn at first; the rest behind one button (a queue can hold 20,000 kinds of message). */
const GROUPS_SHOWN = 100;
/** Entries listed when a group is opened in queue order. */
const ENTRIES_SHOWN = 200;

/** A peer as the rows say it: "rank 1", "ANY", "local 3 (world ?)". */
function peerText(op: Parameters<typeof formatPeer>[0], resolved: number | null): string {
  const p = formatPeer(op, resolved);
  return /^\d/.test(p) ? `rank ${p}` : p;
}

/** "20,000 ×" before a group's line; nothing for a single entry. */
function Count({ n }: { n: number }) {
  if (n === 1) return null;
  return (
    <strong className="count" data-testid="order-group-count">
      {formatCount(n)} ×{' '}
    </strong>
  );
}

/** A queue the library cannot show, said once: the reader's own report (the DLL's return code) on hover. */
function QueueUnknown({ text, reason }: { text: string; reason: string | undefined }) {
  return (
    <div className="unavailable" role="note" data-testid="queue-unavailable" title={reason}>
      <p>{text}</p>
    </div>
  );
}

/** The first GROUPS_SHOWN groups, then a button for the rest. */
function GroupList<T>({
  groups,
  label,
  render,
}: {
  groups: readonly EntryGroup<T>[];
  /** What a group is, for the button ("kinds of receive"). */
  label: string;
  render: (g: EntryGroup<T>) => ReactNode;
}) {
  const [all, setAll] = useState(false);
  const shown = all ? groups : groups.slice(0, GROUPS_SHOWN);
  return (
    <>
      <ol className="order-list">{shown.map(render)}</ol>
      {groups.length > shown.length && (
        <button type="button" className="link" onClick={() => setAll(true)}>
          Show all {formatCount(groups.length)} {label} ({formatCount(groups.length - shown.length)} more)
        </button>
      )}
    </>
  );
}

/** A group's entries one by one, in queue order, drawn only once opened. */
function InOrder({ count, what, children }: { count: number; what: string; children: () => ReactNode }) {
  const [open, setOpen] = useState(false);
  if (count === 1) return null;
  return (
    <details onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>
        The {formatCount(count)} {what} in queue order
      </summary>
      {open && children()}
    </details>
  );
}

function OrderBody({
  order,
  caveats,
  snapshot,
  setUrl,
}: {
  order: MatchingOrder;
  caveats: CaveatState;
  snapshot: JobSnapshot;
  setUrl: ViewProps['setUrl'];
}) {
  const unit = snapshot.mpi.lengthUnit;
  const library = snapshot.mpi.library;
  const { comm, rank } = order;
  // A limit this view already states as an unknown queue of this rank is not said again.
  const said = new Set<string>([
    ...(order.unexpected === null ? ['unexpected-hidden'] : []),
    ...(order.sends === null ? ['sends-hidden'] : []),
  ]);
  return (
    <div className="order-columns">
      <section className="order-col">
        <h3>
          Posted receives <span className="muted">in matching order (#0 is tried first)</span>
        </h3>
        {order.receives === null || order.receiveGroups === null ? (
          <QueueUnknown
            text={unavailableQueueText(library, 'receives', comm.unavailable.receives?.code)}
            reason={comm.unavailable.receives?.message}
          />
        ) : order.receives.length === 0 ? (
          <p className="empty">No posted receives (the library looked and found none).</p>
        ) : (
          <>
            <Caveats caveats={caveats} said={said} />
            <GroupList
              groups={order.receiveGroups}
              label="kinds of receive"
              render={(g) => (
                <ReceiveGroupItem key={g.key} group={g} order={order} unit={unit} setUrl={setUrl} />
              )}
            />
          </>
        )}
      </section>
      <section className="order-col">
        <h3>
          Unexpected messages <span className="muted">in arrival order</span>
        </h3>
        {order.unexpected === null || order.unexpectedGroups === null ? (
          <QueueUnknown
            text={unavailableQueueText(library, 'unexpected', comm.unavailable.unexpected?.code)}
            reason={comm.unavailable.unexpected?.message}
          />
        ) : order.unexpected.length === 0 ? (
          <p className="empty">No unexpected messages (the library looked and found none).</p>
        ) : (
          <GroupList
            groups={order.unexpectedGroups}
            label="kinds of message"
            render={(g) => <UnexpectedGroupItem key={g.key} group={g} unit={unit} />}
          />
        )}
        <h3>
          Pending sends{' '}
          <span className="muted">
            from rank {rank} on {commLabel(comm)}
          </span>
        </h3>
        {order.sends === null || order.sendGroups === null ? (
          <QueueUnknown
            text={unavailableQueueText(library, 'sends', comm.unavailable.sends?.code)}
            reason={comm.unavailable.sends?.message}
          />
        ) : order.sends.length === 0 ? (
          <p className="empty">No pending sends.</p>
        ) : (
          <GroupList
            groups={order.sendGroups}
            label="kinds of send"
            render={(g) => <SendGroupItem key={g.key} group={g} unit={unit} setUrl={setUrl} />}
          />
        )}
      </section>
    </div>
  );
}

function UnexpectedGroupItem({
  group,
  unit,
}: {
  group: EntryGroup<UnexpectedRow>;
  unit: 'bytes' | 'elements';
}) {
  const u = group.first;
  return (
    <li className="order-row" data-testid="order-unexpected-row" data-count={group.count}>
      <span className="pos">{positionsText(group.positions)}</span> <Count n={group.count} />
      from <strong>{peerText(u.op, u.from)}</strong>, tag <strong>{formatTag(u.op.tag)}</strong>,{' '}
      {formatOpSize(u.op, unit)}
      {u.firstMatchingReceive !== null && (
        <div className="warn">
          Posted receive #{u.firstMatchingReceive} matches{' '}
          {group.count === 1 ? 'this message' : 'these messages'}, yet both are queued: the library had not
          progressed when the snapshot was taken, or the snapshot caught it mid-update.
        </div>
      )}
    </li>
  );
}

function SendGroupItem({
  group,
  unit,
  setUrl,
}: {
  group: EntryGroup<SendRow>;
  unit: 'bytes' | 'elements';
  setUrl: ViewProps['setUrl'];
}) {
  const { op, to } = group.first;
  return (
    <li className="order-row" data-testid="order-send-row" data-count={group.count}>
      <span className="pos">{positionsText(group.positions)}</span> <Count n={group.count} />
      to{' '}
      {to === null ? (
        <strong>{formatPeer(op, to)}</strong>
      ) : (
        <button type="button" className="link" onClick={() => setUrl({ rank: to, rcomm: null }, 'replace')}>
          rank {to}
        </button>
      )}
      , tag <strong>{formatTag(op.tag)}</strong>, {formatOpSize(op, unit)}
      {(op.status !== 'pending' || op.corrected !== undefined) && (
        <span className="badge">{formatOpStatus(op)}</span>
      )}
    </li>
  );
}

/** The analysis's limits on matching: queues where a message could be without anyone seeing it. */
function Caveats({ caveats, said }: { caveats: CaveatState; said: ReadonlySet<string> }) {
  switch (caveats.kind) {
    case 'pending':
      return null;
    case 'failed':
      return (
        <div className="hint muted">
          The analysis failed ({caveats.message}): its limits on matching are not shown.
        </div>
      );
    case 'ok': {
      const limits = caveats.limits.filter((l) => !said.has(l.code));
      if (limits.length === 0) return null;
      return (
        <div className="hint">
          {limits.map((l) => (
            <div key={l.code} data-limit={l.code}>
              Analysis limit: {l.text}.
            </div>
          ))}
        </div>
      );
    }
    default:
      return assertUnreachable(caveats);
  }
}

/** What the receives of a group would take, in words. */
function groupVerdict(group: EntryGroup<ReceiveRow>, order: MatchingOrder): string {
  const row = group.first;
  const n = group.count;
  if (row.op.status === 'complete')
    return n === 1
      ? 'Completed: kept in the queue until the request is freed.'
      : 'Completed: kept in the queue until the requests are freed.';
  const takers = group.items.filter((r) => r.takes !== null);
  const none =
    row.matchCount > 0
      ? n === 1
        ? 'Every matching message is taken by an earlier receive.'
        : 'every matching message is taken by an earlier receive.'
      : n === 1
        ? 'Nothing visible can satisfy this receive.'
        : 'nothing visible can satisfy them.';
  if (n === 1) return row.takes === null ? none : `Would take ${takenByText(order, row.takes)}.`;
  if (takers.length === 0) return `None would take a message: ${none}`;
  const first = takers
    .slice(0, 3)
    .map((r) => `#${r.position} ${takenByText(order, r.takes ?? 0)}`)
    .join(', ');
  const more = takers.length > 3 ? ` and ${formatCount(takers.length - 3)} more` : '';
  return takers.length === n
    ? `Each would take a message: ${first}${more}.`
    : `${formatCount(takers.length)} would take a message (${first}${more}); the other ${formatCount(n - takers.length)}: ${none}`;
}

function ReceiveGroupItem({
  group,
  order,
  unit,
  setUrl,
}: {
  group: EntryGroup<ReceiveRow>;
  order: MatchingOrder;
  unit: 'bytes' | 'elements';
  setUrl: ViewProps['setUrl'];
}) {
  const row = group.first;
  const { op, source } = row;
  const explained = row.nearMisses;
  // The near-miss line of each candidate, so its "why" is worded the same in both lists.
  const nearLines = new Map<number, NearMissLine>();
  for (const l of explained?.lines ?? []) nearLines.set(l.candidate, l);
  const members = new Set(group.positions);
  return (
    <li
      className={`order-row${row.matchCount === 0 && op.status === 'pending' ? ' starved' : ''}`}
      data-testid="order-row"
      data-count={group.count}
    >
      <div className="order-line">
        <span className="pos">{positionsText(group.positions)}</span> <Count n={group.count} />
        from <strong className={row.anySource ? 'wild' : ''}>{peerText(op, source)}</strong>, tag{' '}
        <strong className={row.anyTag ? 'wild' : ''}>{formatTag(op.tag)}</strong>, up to{' '}
        {formatOpSize(op, unit)}
        {(op.status !== 'pending' || op.corrected !== undefined) && (
          <span className="badge">{formatOpStatus(op)}</span>
        )}
      </div>
      <div className="order-verdict">
        {groupVerdict(group, order)}
        {row.matchCount > 0 && (
          <span className="muted">
            {' '}
            {plural(row.matchCount, 'matching message')}
            {group.count > 1 ? ' for each' : ''}.
          </span>
        )}
      </div>
      {op.status === 'pending' && (
        <NearMisses members={members} explained={explained} order={order} setUrl={setUrl} />
      )}
      <InOrder count={group.count} what="receives">
        {() => (
          <ol className="order-entries">
            {group.items.slice(0, ENTRIES_SHOWN).map((r) => (
              <li key={r.position}>
                #{r.position}
                {r.takes === null ? '' : `: would take ${takenByText(order, r.takes)}`}
              </li>
            ))}
            {group.count > ENTRIES_SHOWN && (
              <li className="muted">{formatCount(group.count - ENTRIES_SHOWN)} more, the same</li>
            )}
          </ol>
        )}
      </InOrder>
      {row.verdicts.length > 0 && (
        <details>
          <summary>
            {plural(order.candidates.length, 'candidate')} addressed to rank {order.rank}
          </summary>
          <table className="ops compact">
            <thead>
              <tr>
                <th>Match</th>
                <th>Message</th>
                <th>Why</th>
              </tr>
            </thead>
            <tbody>
              {row.verdicts.map((v) => (
                <VerdictRow
                  key={v.candidate}
                  v={v}
                  model={nearLines.get(v.candidate)}
                  explained={explained}
                  order={order}
                  unit={unit}
                  setUrl={setUrl}
                />
              ))}
            </tbody>
          </table>
          {row.omitted > 0 && <p className="muted">{plural(row.omitted, 'more candidate')} not listed.</p>}
        </details>
      )}
    </li>
  );
}

/** The analysis's near misses of one pending receive: candidates that differ in at most one field. */
function NearMisses({
  members,
  explained,
  order,
  setUrl,
}: {
  /** Positions in the queue of the receives these near misses are of (one group of equal receives). */
  members: ReadonlySet<number>;
  explained: ReceiveNearMisses | null;
  order: MatchingOrder;
  setUrl: ViewProps['setUrl'];
}) {
  if (explained === null) {
    return (
      <div className="order-verdict muted">
        No near miss: no visible message differs from {members.size === 1 ? 'this receive' : 'these receives'}{' '}
        in only one field.
      </div>
    );
  }
  const commName = order.comm.name;
  return (
    <div className="order-verdict">
      <div className="muted">
        {plural(explained.lines.length, 'near miss', 'near misses')} (the analysis: messages that differ in at
        most one of communicator, source, tag):
      </div>
      <ul className="order-near-misses">
        {explained.lines.map((l) => {
          const local = order.candidates[l.candidate];
          const takenBy = order.takenBy[l.candidate] ?? null;
          return (
            <li
              key={l.candidate}
              data-testid="order-near-miss"
              className={l.wouldMatch ? 'match' : 'nomatch'}
            >
              {l.wouldMatch ? '✓' : '✗'}{' '}
              <button
                type="button"
                className="link"
                onClick={() => setUrl({ rank: l.ref.rank, rcomm: local?.comm.id ?? null }, 'replace')}
              >
                {nearMissWhere(l.ref)}
              </button>{' '}
              from rank {l.from ?? '?'} tag {formatTag(l.tag)} on{' '}
              {l.ref.commName || 'an unnamed communicator'}: {nearMissWhy(l, explained, commName)}
              {l.wouldMatch && takenBy !== null
                ? members.has(takenBy)
                  ? members.size === 1
                    ? ' (this receive takes it)'
                    : ` (receive #${takenBy} of these takes it)`
                  : ` (taken by receive #${takenBy})`
                : ''}
            </li>
          );
        })}
      </ul>
      {explained.notes.map((n) => (
        <div key={n} className="warn">
          {n}.
        </div>
      ))}
    </div>
  );
}

function VerdictRow({
  v,
  model,
  explained,
  order,
  unit,
  setUrl,
}: {
  v: MatchVerdict;
  /** The near-miss line of this candidate, when it is one. */
  model: NearMissLine | undefined;
  explained: ReceiveNearMisses | null;
  order: MatchingOrder;
  unit: 'bytes' | 'elements';
  setUrl: ViewProps['setUrl'];
}) {
  const c = order.candidates[v.candidate];
  if (c === undefined) return null;
  const takenBy = order.takenBy[v.candidate] ?? null;
  return (
    <tr className={v.matches ? 'match' : 'nomatch'}>
      <td>{v.matches ? '✓' : '✗'}</td>
      <td>
        {c.origin === 'unexpected' ? 'unexpected' : 'pending send'} from{' '}
        {c.fromRank === null ? (
          '?'
        ) : (
          <button
            type="button"
            className="link"
            onClick={() => setUrl({ rank: c.heldBy, rcomm: c.comm.id }, 'replace')}
          >
            rank {c.fromRank}
          </button>
        )}{' '}
        tag {formatTag(c.op.tag)} · {formatOpSize(c.op, unit)} · {commLabel(c.comm)}
      </td>
      <td>
        {model && explained && !model.wouldMatch
          ? nearMissWhy(model, explained, order.comm.name)
          : v.matches
            ? [
                takenBy !== null ? `taken by receive #${takenBy}` : 'matches',
                v.truncates ? `longer than the receive buffer: MPI_ERR_TRUNCATE` : '',
                v.lengths === 'units-differ'
                  ? 'its size and the receive buffer are in different units: truncation not checked'
                  : '',
              ]
                .filter(Boolean)
                .join('; ')
            : v.reasons.map(reasonText).join('; ')}
      </td>
    </tr>
  );
}
