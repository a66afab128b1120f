// The Stacks view (key s): every rank's stack merged into one call-prefix tree, as STAT and DDT's
// parallel stacks draw it. The model decides what a node is (buildStackTree: user frames by
// function and line, the MPI call, the library's frames inside it, the runtime's own threads) and
// which rows show (stackRows: straight chains as one row, MPI calls folded); this file draws them.
// A ~20-stack job at 16,384 ranks is a few hundred nodes and fewer rows, so the tree is plain DOM,
// a WAI-ARIA tree: one tab stop (roving tabindex), arrows move, Left/Right fold and unfold. Search
// highlights frames by function or file:line; a click or Enter selects the node's ranks (the
// URL's `ranks`, which the matrix also filters on) and offers the rank detail and the matrix.
import {
  expandRanks,
  type JobSnapshot,
  ompStatesThrough,
  outlierWhy,
  ranksPhrase,
  type StackNode,
  type StackRow,
  type StackTree,
  searchStackTree,
  stackNodePlace,
  stackRows,
} from '@mqd/model';
import { type KeyboardEvent, useEffect, useMemo, useRef, useState } from 'react';
import { formatCount, plural } from '../format.js';
import { useBusyWhile } from '../hooks.js';
import type { UrlState } from '../url-state.js';
import type { ViewProps } from '../view-types.js';
import { isPythonNode } from './python-frame.js';
import { useStackTree } from './stack-tree.js';

/** Ranges longer than this are cut in rows (the detail panel shows them whole). */
const MAX_RANGE_CHARS = 48;

function shortRanges(r: string): string {
  return r.length > MAX_RANGE_CHARS ? `${r.slice(0, MAX_RANGE_CHARS - 1)}…` : r;
}

/** A frame in words: `main at wrong_tag.c:36`, or the function alone. */
function frameText(n: StackNode): string {
  const place = stackNodePlace(n);
  return place === null ? n.function : `${n.function} at ${place}`;
}

/** A stack in a few words: the caller and the MPI call (the stack's leaf), else its two innermost frames. */
function stackLabel(tree: StackTree, leaf: number): string {
  const n = tree.nodes[leaf];
  if (n === undefined) return '';
  const up = tree.nodes[n.parent];
  return up === undefined ? frameText(n) : `${frameText(up)} › ${frameText(n)}`;
}

export function StacksView({ url, setUrl, data }: ViewProps) {
  const tree = useStackTree(data.snapshot, url.threads, { by: url.sby, hideRuntime: !url.srt });
  useBusyWhile(tree === null);
  if (tree === null) return <p className="empty">Merging the stacks…</p>;
  if ('failed' in tree) {
    return (
      <div className="error" role="alert">
        The stacks could not be merged ({tree.failed}); the other views are unaffected.
      </div>
    );
  }
  // A new tree (snapshot or options) has new node ids: the folds and the focus start afresh.
  return <StacksTree key={treeKey(tree)} tree={tree} url={url} setUrl={setUrl} snapshot={data.snapshot} />;
}

const treeKeys = new WeakMap<StackTree, number>();
let nextTreeKey = 0;
function treeKey(t: StackTree): number {
  let k = treeKeys.get(t);
  if (k === undefined) {
    k = nextTreeKey++;
    treeKeys.set(t, k);
  }
  return k;
}

/** The toggles that open `id` and every row above it (after a deep link selected it). */
function revealed(tree: StackTree, id: number, toggled: ReadonlySet<number>): ReadonlySet<number> {
  let next: Set<number> | null = null;
  for (let p = tree.nodes[tree.nodes[id]?.parent ?? -1]; p !== undefined; p = tree.nodes[p.parent]) {
    // A row is open when (folded by default) equals (toggled): stackRows.
    const want = p.kind === 'mpi-call';
    if (toggled.has(p.id) !== want) {
      next ??= new Set(toggled);
      if (want) next.add(p.id);
      else next.delete(p.id);
    }
  }
  return next ?? toggled;
}

function StacksTree({
  tree,
  url,
  setUrl,
  snapshot,
}: {
  tree: StackTree;
  url: UrlState;
  setUrl: ViewProps['setUrl'];
  snapshot: JobSnapshot;
}) {
  const [toggled, setToggled] = useState<ReadonlySet<number>>(() =>
    url.snode === null ? new Set() : revealed(tree, url.snode, new Set()),
  );
  const [unchained, setUnchained] = useState<ReadonlySet<number>>(() => new Set());
  const [chains, setChains] = useState(true);
  const [query, setQuery] = useState(url.sq ?? '');
  const found = useMemo(() => searchStackTree(tree, url.sq ?? ''), [tree, url.sq]);
  const selected = url.snode === null ? undefined : tree.nodes[url.snode];

  // A node selected from elsewhere (a diagnosis link, the list of stacks) is shown.
  useEffect(() => {
    if (url.snode !== null) setToggled((t) => revealed(tree, url.snode ?? -1, t));
  }, [tree, url.snode]);

  const rows = useMemo(() => {
    // A match or the selected node ends its chain, so its own name is the row's.
    const breakAt = new Set(found.matches);
    if (url.snode !== null) breakAt.add(url.snode);
    return stackRows(tree, { chains, toggled, unchained, open: found.onPath, breakAt });
  }, [tree, chains, toggled, unchained, found, url.snode]);

  // Roving tabindex: one row is the tree's tab stop; arrows move it.
  const [focusNode, setFocusNode] = useState<number | null>(null);
  const focusIndex = Math.max(
    0,
    rows.findIndex(
      (r) => r.node === (focusNode ?? url.snode ?? -1) || r.nodes.includes(focusNode ?? url.snode ?? -1),
    ),
  );
  const rowEls = useRef(new Map<number, HTMLDivElement>());
  const moveFocus = useRef(false);
  useEffect(() => {
    if (!moveFocus.current) return;
    moveFocus.current = false;
    const r = rows[focusIndex];
    if (r !== undefined) rowEls.current.get(r.node)?.focus();
  }, [rows, focusIndex]);

  const toggle = (id: number) =>
    setToggled((t) => {
      const next = new Set(t);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  const select = (n: StackNode) => setUrl({ snode: n.id, ranks: n.ranks, cell: null }, 'replace');

  const onKey = (e: KeyboardEvent<HTMLDivElement>) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const row = rows[focusIndex];
    if (row === undefined) return;
    let to = -1;
    switch (e.key) {
      case 'ArrowDown':
        to = Math.min(rows.length - 1, focusIndex + 1);
        break;
      case 'ArrowUp':
        to = Math.max(0, focusIndex - 1);
        break;
      case 'Home':
        to = 0;
        break;
      case 'End':
        to = rows.length - 1;
        break;
      case 'ArrowRight':
        if (row.expandable && !row.expanded) toggle(row.node);
        else if (row.expanded) to = focusIndex + 1;
        break;
      case 'ArrowLeft':
        if (row.expanded) toggle(row.node);
        else if (row.parentRow >= 0) to = row.parentRow;
        break;
      case 'Enter':
      case ' ': {
        const n = tree.nodes[row.node];
        if (n !== undefined) select(n);
        break;
      }
      default:
        return;
    }
    e.preventDefault();
    e.stopPropagation();
    const target = rows[to];
    if (target !== undefined) {
      moveFocus.current = true;
      setFocusNode(target.node);
    }
  };

  if (tree.rankCount === 0) {
    return (
      <div className="empty" data-testid="stacks-empty">
        <p>
          This snapshot has no stacks
          {tree.missing !== '' ? ` (not read on ranks ${shortRanges(tree.missing)})` : ''}.
        </p>
        <p className="muted">Stacks are unwound in the same stop as the queues by agents that support it.</p>
      </div>
    );
  }
  const all = tree.threads === 'all';
  return (
    <div className="stacks-layout">
      <section className="stacks-main">
        <div className="toolbar">
          <form
            onSubmit={(e) => {
              e.preventDefault();
              setUrl({ sq: query.trim() === '' ? null : query.trim() }, 'replace');
            }}
          >
            <input
              type="search"
              placeholder="Find a function or file:line"
              value={query}
              onChange={(e) => {
                setQuery(e.target.value);
                setUrl({ sq: e.target.value.trim() === '' ? null : e.target.value.trim() }, 'replace');
              }}
              aria-label="Find a function or file:line"
              data-testid="stacks-search"
            />
          </form>
          <fieldset className="segmented" aria-label="Threads">
            {(['main', 'all'] as const).map((m) => (
              <button
                key={m}
                type="button"
                aria-pressed={url.threads === m}
                onClick={() => setUrl({ threads: m, snode: null }, 'replace')}
              >
                {m === 'main' ? 'Main threads' : 'All threads'}
              </button>
            ))}
          </fieldset>
          <fieldset className="segmented" aria-label="Frames" data-testid="stacks-by">
            {(['line', 'function'] as const).map((b) => (
              <button
                key={b}
                type="button"
                aria-pressed={url.sby === b}
                onClick={() => setUrl({ sby: b, snode: null }, 'replace')}
                title={
                  b === 'line'
                    ? 'A frame of your code is its function and source line'
                    : 'Merge the frames of one function whatever the line'
                }
              >
                {b === 'line' ? 'By line' : 'By function'}
              </button>
            ))}
          </fieldset>
          <label className="stacks-chains">
            <input type="checkbox" checked={chains} onChange={(e) => setChains(e.target.checked)} /> One row
            per straight chain
          </label>
          <button
            type="button"
            onClick={() => {
              setUnchained(new Set());
              setToggled(new Set(tree.nodes.filter((n) => n.kind === 'mpi-call').map((n) => n.id)));
            }}
          >
            Expand all
          </button>
          <button
            type="button"
            onClick={() => {
              setUnchained(new Set());
              setToggled(new Set());
            }}
          >
            Fold MPI calls
          </button>
        </div>
        <p className="muted stacks-summary" data-testid="stacks-summary">
          {plural(tree.rankCount, 'rank')}
          {all ? `, ${plural(tree.threadCount, 'thread')}` : ''}, {plural(tree.stackTotal, 'distinct stack')}
          {tree.by === 'line' ? ' (by line)' : ' (by function)'}
          {url.sq ? ` · ${plural(found.matches.size, 'match', 'matches')}` : ''}
          {tree.missing !== '' ? ` · no stacks: ${shortRanges(tree.missing)}` : ''}
        </p>
        {all && tree.runtimeThreads > 0 && (
          <p
            className="muted stacks-runtime"
            data-testid="stacks-runtime-threads"
            data-count={tree.runtimeThreads}
            data-hidden={tree.runtimeThreadsHidden}
          >
            {tree.runtimeThreadsHidden
              ? `${plural(tree.runtimeThreads, 'MPI runtime thread')} hidden (progress and service threads of ${plural(
                  expandRanks(tree.runtimeThreadRanks)?.length ?? 0,
                  'rank',
                )}).`
              : `${plural(tree.runtimeThreads, 'MPI runtime thread')} shown.`}{' '}
            <button
              type="button"
              className="link"
              onClick={() => setUrl({ srt: !url.srt, snode: null }, 'replace')}
            >
              {tree.runtimeThreadsHidden ? 'Show them' : 'Hide them'}
            </button>
          </p>
        )}
        <div className="stack-head muted" aria-hidden="true">
          <span className="stack-head-counts">{all ? 'ranks · threads' : 'ranks'}</span>
          <span>frame</span>
        </div>
        <div className="stack-tree" role="tree" aria-label="Merged stacks" data-testid="stacks-tree">
          {rows.map((r, i) => (
            <Row
              key={`${r.chainHead}:${r.node}`}
              tree={tree}
              row={r}
              tabStop={i === focusIndex}
              selected={url.snode !== null && r.nodes.includes(url.snode)}
              match={r.nodes.some((id) => found.matches.has(id))}
              rowRef={(el) => {
                if (el) rowEls.current.set(r.node, el);
                else rowEls.current.delete(r.node);
              }}
              onToggle={() => toggle(r.node)}
              onUnchain={() =>
                setUnchained((u) => {
                  const next = new Set(u);
                  if (next.has(r.chainHead)) next.delete(r.chainHead);
                  else next.add(r.chainHead);
                  return next;
                })
              }
              onSelect={(n) => {
                setFocusNode(r.node);
                select(n);
              }}
              onKey={onKey}
            />
          ))}
        </div>
      </section>
      <aside className="panel stack-detail" aria-label="Selected frame">
        {selected ? (
          <NodeDetail tree={tree} node={selected} setUrl={setUrl} snapshot={snapshot} />
        ) : (
          <p className="muted">
            Click a frame (or press Enter on it) to select the ranks whose stacks pass through it.
          </p>
        )}
        <h3>Distinct stacks</h3>
        <p className="muted stacks-note">Down to the MPI call: frames inside the library do not count.</p>
        <ul className="stack-classes" data-testid="stack-classes">
          {tree.stacks.slice(0, 30).map((c) => (
            <li key={c.leaf} data-ranks={c.ranks}>
              <button
                type="button"
                className="link"
                onClick={() => setUrl({ snode: c.leaf, ranks: c.ranks, cell: null }, 'replace')}
              >
                {plural(c.rankCount, 'rank')} [{c.ranks.length > 24 ? `${c.ranks.slice(0, 23)}…` : c.ranks}]
              </button>{' '}
              <span className="muted">{stackLabel(tree, c.leaf)}</span>
            </li>
          ))}
        </ul>
        {tree.stackTotal > 30 && <p className="muted">{tree.stackTotal - 30} more.</p>}
        {tree.outliers !== '' && (
          <p data-testid="stack-outliers">
            Outliers: {ranksPhrase(tree.outliers)} ({outlierWhy('a stack', tree.rankCount)})
          </p>
        )}
      </aside>
    </div>
  );
}

function Row({
  tree,
  row,
  tabStop,
  selected,
  match,
  rowRef,
  onToggle,
  onUnchain,
  onSelect,
  onKey,
}: {
  tree: StackTree;
  row: StackRow;
  tabStop: boolean;
  selected: boolean;
  match: boolean;
  rowRef: (el: HTMLDivElement | null) => void;
  onToggle: () => void;
  onUnchain: () => void;
  onSelect: (n: StackNode) => void;
  onKey: (e: KeyboardEvent<HTMLDivElement>) => void;
}) {
  const n = tree.nodes[row.node];
  if (n === undefined) return null;
  const all = tree.threads === 'all';
  const place = stackNodePlace(n);
  const python = isPythonNode(n);
  const above = row.nodes.length - 1;
  const share = tree.rankCount > 0 ? n.rankCount / tree.rankCount : 0;
  const cls = ['stack-node', `kind-${n.kind}`, match ? 'match' : '', selected ? 'selected' : '']
    .filter(Boolean)
    .join(' ');
  const label = [
    python ? `Python frame ${frameText(n)}` : frameText(n),
    above > 0 ? `(and ${plural(above, 'frame')} above it)` : '',
    `${plural(n.rankCount, 'rank')} ${n.ranks.length <= 64 ? n.ranks : shortRanges(n.ranks)}`,
    all ? plural(n.threadCount, 'thread') : '',
    row.foldedByDefault && !row.expanded ? 'frames inside MPI folded' : '',
  ]
    .filter(Boolean)
    .join(', ');
  return (
    <div
      ref={rowRef}
      className={cls}
      role="treeitem"
      tabIndex={tabStop ? 0 : -1}
      aria-level={row.level}
      aria-setsize={row.setSize}
      aria-posinset={row.posInSet}
      aria-expanded={row.expandable ? row.expanded : undefined}
      aria-selected={selected}
      aria-label={label}
      data-testid="stack-node"
      data-function={n.function}
      data-place={place ?? undefined}
      data-kind={n.kind}
      data-python={python ? 'true' : undefined}
      data-ranks={n.ranks}
      data-count={n.rankCount}
      data-threads={n.threadCount}
      data-chain={row.nodes.length}
      onClick={() => onSelect(n)}
      onKeyDown={onKey}
    >
      <span className="stack-counts">
        <span className="stack-bar" style={{ width: `${Math.max(2, Math.round(share * 100))}%` }} />
        <span className="count">{formatCount(n.rankCount)}</span>
        {all && <span className="threads">{formatCount(n.threadCount)}</span>}
      </span>
      <span className="stack-frame" style={{ paddingLeft: `${(row.level - 1) * 16}px` }}>
        <span
          className="twisty"
          aria-hidden="true"
          onClick={(e) => {
            e.stopPropagation();
            if (row.expandable) onToggle();
          }}
        >
          {row.expandable ? (row.expanded ? '▾' : '▸') : '·'}
        </span>
        <span className="ranges">[{shortRanges(n.ranks)}]</span>
        {above > 0 && (
          <span
            className="chain muted"
            aria-hidden="true"
            title={row.nodes.map((id) => tree.nodes[id]?.function ?? '').join(' › ')}
            onClick={(e) => {
              e.stopPropagation();
              onUnchain();
            }}
          >
            +{above} ›
          </span>
        )}
        {above === 0 && row.chainLength > 1 && row.node === row.chainHead && (
          <span
            className="chain muted"
            aria-hidden="true"
            title="One row for this chain"
            onClick={(e) => {
              e.stopPropagation();
              onUnchain();
            }}
          >
            ⊟
          </span>
        )}
        <span className="fn" title={n.module ?? ''}>
          <bdi>{n.function}</bdi>
        </span>
        {place !== null && <span className="place">{place}</span>}
        {python && <span className="badge python">Python</span>}
        {n.kind === 'mpi-call' && row.foldedByDefault && !row.expanded && (
          <span className="folded muted">library frames folded</span>
        )}
        {n.module !== null && n.kind !== 'user' && <span className="module muted">{n.module}</span>}
      </span>
    </div>
  );
}

function NodeDetail({
  tree,
  node,
  setUrl,
  snapshot,
}: {
  tree: StackTree;
  node: StackNode;
  setUrl: ViewProps['setUrl'];
  snapshot: JobSnapshot;
}) {
  const first = useMemo(() => expandRanks(node.ranks)?.[0] ?? null, [node.ranks]);
  const path = useMemo(() => {
    const out: StackNode[] = [];
    for (let p: StackNode | undefined = node; p !== undefined; p = tree.nodes[p.parent]) out.unshift(p);
    return out;
  }, [tree, node]);
  // The OpenMP state of each thread through this frame (ThreadStack.ompState), when OMPD read them.
  const ompStates = useMemo(
    () =>
      ompStatesThrough(
        snapshot,
        path.map((p) => p.function),
        tree.threads,
      ),
    [snapshot, path, tree.threads],
  );
  const place = stackNodePlace(node);
  return (
    <div data-testid="stack-selected" data-function={node.function} data-ranks={node.ranks}>
      <h3>
        <bdi>{node.function}</bdi>
        {place !== null && <span className="place"> {place}</span>}
      </h3>
      <p className="muted">
        {node.module ?? (isPythonNode(node) ? 'Python frame' : 'no module')}
        {node.kind === 'mpi-call'
          ? ' · the MPI call'
          : node.kind === 'mpi-inside'
            ? ' · inside the MPI library'
            : ''}
      </p>
      <p>
        {plural(node.rankCount, 'rank')}
        {tree.threads === 'all' ? ` (${plural(node.threadCount, 'thread')})` : ''}:{' '}
        {node.ranks.length <= 240 ? (
          <code className="ranges-full">{node.ranks}</code>
        ) : (
          <details>
            <summary>
              <code>{node.ranks.slice(0, 120)}…</code>
            </summary>
            <code className="ranges-full">{node.ranks}</code>
          </details>
        )}
      </p>
      <p className="muted stack-path">{path.map(frameText).join(' › ')}</p>
      {ompStates.length > 0 && (
        <ul
          className="stack-omp-states"
          data-testid="stack-omp-states"
          aria-label="OpenMP states of these threads"
        >
          {ompStates.map((c) => (
            <li key={c.label} data-state={c.label}>
              {plural(c.count, 'thread')}{' '}
              {c.label === '' ? <span className="muted">not an OpenMP thread</span> : `OpenMP ${c.label}`}
            </li>
          ))}
        </ul>
      )}
      <div className="actions">
        <button
          type="button"
          data-testid="stack-to-rank"
          disabled={first === null}
          onClick={() => first !== null && setUrl({ view: 'rank', rank: first })}
        >
          Rank {first ?? '?'} detail
        </button>
        <button
          type="button"
          data-testid="stack-to-matrix"
          onClick={() => setUrl({ view: 'matrix', ranks: node.ranks, cell: null })}
        >
          Matrix of these ranks
        </button>
      </div>
    </div>
  );
}
