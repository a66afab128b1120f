// Everything the snapshot knows about one rank: its state and errors, how long it was paused,
// every communicator and each of its three queues with all fields and the library's extra text.
// A queue the library cannot show is said so in plain words, never drawn as an empty list.
import {
  type Communicator,
  callPeer,
  suggestedOrderRank as defaultRank,
  type EntryGroup,
  foldMpiName,
  groupEntries,
  isBlockingCall,
  type JobSnapshot,
  type LengthUnit,
  type MpiLibrary,
  type Operation,
  ompStateLabel,
  opGroupKey,
  peerGlobalRank,
  positionsText,
  QUEUE_KINDS,
  QUEUE_LABEL,
  type QueueKind,
  type RankSnapshot,
  type ThreadStack,
  unavailableQueueText,
} from '@mqd/model';
import { useEffect, useMemo, useRef } from 'react';
import {
  commLabel,
  formatCount,
  formatMicros,
  formatOpSize,
  formatOpStatus,
  formatPeer,
  formatTag,
} from '../format.js';
import { RankPicker } from '../RankPicker.js';
import { contextOf } from '../snapshot-context.js';
import { CodedText, QueueSourceNote, StatusCorrections, Unavailable } from '../ui.js';
import { parseFrameParam } from '../url-state.js';
import type { ViewProps } from '../view-types.js';
import { OpenMpPanel } from './OpenMpPanel.js';
import { RankCaveats, RankComms, RankSummary } from './RankSummary.js';
import { ThreadFrames } from './ThreadFrames.js';

const ROWS_PER_QUEUE = 200;

export function RankView({ url, setUrl, data }: ViewProps) {
  const snapshot = data.snapshot;
  const rankNo = url.rank ?? defaultRank(snapshot);
  const rank = useMemo(() => snapshot.ranks.find((r) => r.rank === rankNo) ?? null, [snapshot, rankNo]);
  const { worldSize } = contextOf(snapshot).index;
  // The frame a link selected (the diagnosis's user line): "tid:depth".
  const selected = parseFrameParam(url.frame);

  return (
    <div className="rank-view">
      <div className="toolbar">
        <RankPicker
          snapshot={snapshot}
          rank={rankNo}
          onChange={(r) => setUrl({ rank: r, frame: null }, 'replace')}
        />
      </div>
      {!rank ? (
        <p className="empty">Rank {rankNo ?? '?'} is not in this snapshot (no agent reported it).</p>
      ) : (
        <>
          <RankSummary snapshot={snapshot} rank={rank} url={url} setUrl={setUrl} />
          <dl className="facts" data-testid="rank-facts">
            <dt>World rank</dt>
            <dd>{rank.rank}</dd>
            <dt>Host / pid</dt>
            <dd>
              {rank.host} / {rank.pid}
            </dd>
            <dt>Paused for the read</dt>
            <dd>{formatMicros(rank.pausedMicros)}</dd>
            <dt>State</dt>
            <dd>{rank.state.kind === 'ok' ? 'queues read' : rank.state.kind}</dd>
            <dt>Communicators</dt>
            <dd>{rank.communicators.length}</dd>
            <dt>MPI call</dt>
            <dd data-testid="rank-mpi-call">{describeCall(snapshot, rank)}</dd>
            <dt>Message-queue DLL</dt>
            <dd data-testid="rank-dll">
              {rank.dll
                ? `${rank.dll.path}${rank.dll.version ? ` (${rank.dll.version})` : ''}`
                : snapshot.mpi.dll === null
                  ? 'none loaded for this job'
                  : 'not reported for this rank'}
            </dd>
          </dl>
          {rank.dll && <DllFieldNotes dll={rank.dll} />}
          {rank.state.kind !== 'ok' && (
            <div className="error" role="alert">
              <CodedText error={rank.state} />
            </div>
          )}
          <RankCaveats snapshot={snapshot} />
          <OpenMpPanel rank={rank} />
          <div className="rank-columns">
            <section className="threads" data-testid="rank-threads" aria-label="Threads">
              <h3>Stacks</h3>
              {rank.stacksError && (
                <div className="error" role="alert">
                  <CodedText error={rank.stacksError} />
                </div>
              )}
              {rank.threadLimit && (
                <p className="warn" data-testid="rank-thread-limit">
                  <CodedText error={rank.threadLimit} />
                </p>
              )}
              {rank.threads === undefined ? (
                <p className="muted">Stacks were not read for this rank.</p>
              ) : (
                rank.threads.map((t) => (
                  <ThreadSection
                    key={t.tid}
                    thread={t}
                    inCall={rank.mpiCall?.tid === t.tid}
                    selectedFrame={selected?.tid === t.tid ? selected.index : null}
                  />
                ))
              )}
            </section>
            <div className="queues-column">
              <StatusCorrections rank={rank} />
              <QueueSourceNote rank={rank} />
              <RankComms
                rank={rank}
                render={(c) => (
                  <CommSection
                    key={c.id}
                    comm={c}
                    rank={rank.rank}
                    worldSize={worldSize}
                    library={snapshot.mpi.library}
                    unit={snapshot.mpi.lengthUnit}
                    onOrder={() => setUrl({ view: 'order', rank: rank.rank, rcomm: c.id })}
                  />
                )}
              />
            </div>
          </div>
        </>
      )}
    </div>
  );
}

/**
 * What the DLL's field lookups said (RankSnapshot.dll): fields the library's debug info lacks
 * mean a DLL built for another version of the library, whose queue entries may be wrong (a
 * warning); renamed fields answered at their new place are expected of some builds (a note).
 */
function DllFieldNotes({ dll }: { dll: NonNullable<RankSnapshot['dll']> }) {
  return (
    <>
      {dll.missingFields && dll.missingFields.length > 0 && (
        <p className="warn" data-testid="rank-dll-missing">
          The DLL looked up fields this MPI library's debug info lacks, so it may have been built for another
          version of the library and this rank's queue entries may be wrong:{' '}
          <code>{dll.missingFields.join(', ')}</code>
        </p>
      )}
      {dll.renamedFields && dll.renamedFields.length > 0 && (
        <p className="muted" data-testid="rank-dll-renamed">
          Fields the library renamed, read at their new place: <code>{dll.renamedFields.join(', ')}</code>
        </p>
      )}
    </>
  );
}

/**
 * "MPI_Recv from rank 1, tag 5, count 4, on MPI_COMM_WORLD" (the peer and tag from the rank's
 * queues when the call's arguments could not be read), "computing", "stacks not read".
 */
export function describeCall(snap: JobSnapshot, r: RankSnapshot): string {
  const c = r.mpiCall;
  if (c === undefined) return 'unknown (stacks not read)';
  if (c === null) return 'none: computing (in no MPI call)';
  const name = foldMpiName(c.function);
  const a = c.args;
  const parts: string[] = [name];
  const p = callPeer(snap, r.rank);
  const local = a?.peer?.local ?? null;
  const peer =
    p === null
      ? null
      : p.peer === 'any'
        ? 'any rank'
        : p.peer !== null
          ? `rank ${p.peer}`
          : local !== null
            ? `local rank ${local}`
            : null;
  // "MPI_Recv from rank 1": the name and the peer read as one phrase.
  if (p !== null && peer !== null) parts[0] = `${name} ${p.direction} ${peer}`;
  if (p?.tag !== null && p?.tag !== undefined) parts.push(`tag ${p.tag}`);
  else if (a && a.tag !== null) parts.push(`tag ${a.tag}`);
  if (a) {
    if (a.count !== null) parts.push(`count ${a.count}`);
    if (a.communicator !== null) {
      const comm = r.communicators.find((x) => x.id === a.communicator);
      parts.push(`on ${comm ? commLabel(comm) : `communicator ${a.communicator}`}`);
    }
  }
  return `${parts.join(', ')} · thread ${c.tid} · ${isBlockingCall(name) ? 'blocks until its peers act' : 'returns by itself'}`;
}

function ThreadSection({
  thread,
  inCall,
  selectedFrame,
}: {
  thread: ThreadStack;
  inCall: boolean;
  /** Depth of the selected frame on this thread, null when none is. */
  selectedFrame: number | null;
}) {
  const selectedRow = useRef<HTMLTableRowElement>(null);
  useEffect(() => {
    // A link chose this frame: bring it into view (stacks can be long).
    if (selectedFrame !== null) selectedRow.current?.scrollIntoView({ block: 'center' });
  }, [selectedFrame]);
  return (
    <div className="thread" data-testid="rank-thread" data-tid={thread.tid}>
      <h4>
        Thread {thread.tid}
        {thread.name !== null && <span className="muted"> {thread.name}</span>}
        {thread.main && <span className="badge">main</span>}
        {inCall && <span className="badge">in the MPI call</span>}
        {thread.ompState !== undefined && (
          <span className="badge omp-state" data-testid="thread-omp-state" title={thread.ompState}>
            OpenMP {ompStateLabel(thread.ompState)}
          </span>
        )}
      </h4>
      {thread.error && (
        <p className="muted">
          Unwinding stopped early: <CodedText error={thread.error} />
        </p>
      )}
      <ThreadFrames thread={thread} selectedFrame={selectedFrame} selectedRow={selectedRow} />
      {thread.truncated && <p className="muted">Deeper frames were cut.</p>}
    </div>
  );
}

function CommSection({
  comm,
  rank,
  worldSize,
  library,
  unit,
  onOrder,
}: {
  comm: Communicator;
  rank: number;
  worldSize: number;
  library: MpiLibrary;
  unit: LengthUnit;
  onOrder: () => void;
}) {
  return (
    <section className="comm" data-testid="rank-comm">
      <header>
        <h3>{commLabel(comm)}</h3>
        <span className="muted">
          id {comm.id}
          {typeof comm.fortranHandle === 'number' && (
            <span data-testid="comm-fortran" title="Fortran handle (MPI_Comm_c2f)">
              {' '}
              · Fortran {comm.fortranHandle}
            </span>
          )}{' '}
          · size {comm.size} · this rank is {comm.localRank} here ·{' '}
          {comm.group ? 'group known' : 'group not reported'}
        </span>
        <button type="button" onClick={onOrder}>
          Matching order
        </button>
      </header>
      {QUEUE_KINDS.map((k) => (
        <QueueTable
          key={k}
          kind={k}
          comm={comm}
          rank={rank}
          worldSize={worldSize}
          library={library}
          unit={unit}
        />
      ))}
    </section>
  );
}

function QueueTable({
  kind,
  comm,
  rank,
  worldSize,
  library,
  unit,
}: {
  kind: QueueKind;
  comm: Communicator;
  rank: number;
  worldSize: number;
  library: MpiLibrary;
  unit: LengthUnit;
}) {
  const q = comm[kind];
  const title = QUEUE_LABEL[kind];
  if (q === null) {
    return (
      <div className="queue">
        <h4>{title}</h4>
        <Unavailable
          text={unavailableQueueText(library, kind, comm.unavailable[kind]?.code)}
          reason={comm.unavailable[kind]?.message}
        />
      </div>
    );
  }
  if (q.length === 0) {
    return (
      <div className="queue">
        <h4>
          {title} <span className="muted">none</span>
        </h4>
      </div>
    );
  }
  return <GroupedQueue kind={kind} q={q} comm={comm} rank={rank} worldSize={worldSize} unit={unit} />;
}

/** A queue's entries, identical ones (opGroupKey) one row with their count, the first ROWS_PER_QUEUE rows drawn. */
function GroupedQueue({
  kind,
  q,
  comm,
  rank,
  worldSize,
  unit,
}: {
  kind: QueueKind;
  q: readonly Operation[];
  comm: Communicator;
  rank: number;
  worldSize: number;
  unit: LengthUnit;
}) {
  const groups = useMemo(() => groupEntries(q, opGroupKey), [q]);
  const shown = groups.slice(0, ROWS_PER_QUEUE);
  const grouped = groups.length < q.length;
  return (
    <div className="queue">
      <h4>
        {QUEUE_LABEL[kind]}{' '}
        <span className="muted">
          {formatCount(q.length)}, in matching order
          {grouped && `; ${formatCount(groups.length)} distinct`}
        </span>
      </h4>
      <table className="ops">
        <thead>
          <tr>
            <th>#</th>
            <th>Status</th>
            <th>{kind === 'sends' ? 'To' : 'From'}</th>
            <th>Tag</th>
            <th>Size</th>
            <th>Actual</th>
            <th>Buffer</th>
            <th>Extra text</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((g) => (
            <OpRow key={g.key} group={g} comm={comm} rank={rank} worldSize={worldSize} unit={unit} />
          ))}
        </tbody>
      </table>
      {groups.length > shown.length && (
        <p className="muted">
          {formatCount(groups.length - shown.length)} more kinds of entry (
          {formatCount(shown.reduce((n, g) => n - g.count, q.length))} entries) not shown.
        </p>
      )}
    </div>
  );
}

function OpRow({
  group,
  comm,
  rank,
  worldSize,
  unit,
}: {
  group: EntryGroup<Operation>;
  comm: Communicator;
  rank: number;
  worldSize: number;
  unit: LengthUnit;
}) {
  const op = group.first;
  const a = op.actual;
  return (
    <tr>
      <td>
        {positionsText(group.positions).replace(/#/g, '')}
        {group.count > 1 && (
          <>
            {' '}
            <strong className="count" data-testid="rank-op-count">
              ({formatCount(group.count)} ×)
            </strong>
          </>
        )}
      </td>
      <td>
        {formatOpStatus(op)}
        {op.systemBuffer && <span className="badge">Bsend buffer</span>}
      </td>
      <td className={op.peer.local === null ? 'wild' : ''}>
        {formatPeer(op, peerGlobalRank(op.peer, comm, rank, worldSize))}
      </td>
      <td className={op.tag === null ? 'wild' : ''}>{formatTag(op.tag)}</td>
      <td>{formatOpSize(op, unit)}</td>
      <td>
        {a
          ? `from ${a.peer.global ?? a.peer.local ?? '?'} tag ${formatTag(a.tag)}${a.length === null ? '' : ` · ${formatOpSize(op, unit, a.length)}`}`
          : '—'}
      </td>
      <td>
        <code>{op.buffer}</code>
        {group.count > 1 && <span className="muted"> (the first)</span>}
      </td>
      <td className="extra">{op.extraText.length > 0 ? op.extraText.join(' · ') : '—'}</td>
    </tr>
  );
}
