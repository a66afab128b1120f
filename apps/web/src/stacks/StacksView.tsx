// The Stacks view (key s): every rank's stack merged into one call-prefix tree, as STAT draws
// it. Each node is a frame with the ranks whose stack passes through it (ranges and count);
// a ~20-stack job at 16,384 ranks is a few hundred nodes, so the tree is plain DOM. Search
// highlights frames by function name; a click selects the node's ranks (the URL's `ranks`,
// which the matrix also filters on) and offers the rank detail and the matrix of those ranks.
import {
  expandRanks,
  type JobSnapshot,
  ompStatesThrough,
  type StackNode,
  type StackTree,
  searchStackTree,
} from '@mqd/model';
import { useMemo, useState } from 'react';
import { formatCount, plural } from '../format.js';
import { useBusyWhile } from '../hooks.js';
import type { ViewProps } from '../view-types.js';
import { useStackTree } from './stack-tree.js';

/** Ranges longer than this are cut in rows (the detail panel shows them whole). */
const MAX_RANGE_CHARS = 48;

function shortRanges(r: string): string {
  return r.length > MAX_RANGE_CHARS ? `${r.slice(0, MAX_RANGE_CHARS - 1)}…` : r;
}

function isMpiFrame(fn: string): boolean {
  return /^P?MPI_[A-Z]/.test(fn);
}

/** A stack in a few words: the caller and the outermost MPI frame, else the innermost frames. */
function classLabel(frames: readonly string[]): string {
  const mpi = frames.findIndex(isMpiFrame);
  if (mpi >= 0) return frames.slice(Math.max(0, mpi - 1), mpi + 1).join(' › ');
  return frames.slice(-2).join(' › ');
}

export function StacksView({ url, setUrl, data }: ViewProps) {
  const tree = useStackTree(data.snapshot, url.threads);
  useBusyWhile(tree === null);
  if (tree === null) return <p className="empty">Merging the stacks…</p>;
  if ('failed' in tree) {
    return (
      <div className="error" role="alert">
        The stacks could not be merged ({tree.failed}); the other views are unaffected.
      </div>
    );
  }
  return <StacksTree tree={tree} url={url} setUrl={setUrl} snapshot={data.snapshot} />;
}

function StacksTree({
  tree,
  url,
  setUrl,
  snapshot,
}: {
  tree: StackTree;
  url: ViewProps['url'];
  setUrl: ViewProps['setUrl'];
  snapshot: JobSnapshot;
}) {
  const [collapsed, setCollapsed] = useState<ReadonlySet<number>>(() => new Set());
  const [query, setQuery] = useState(url.sq ?? '');
  const found = useMemo(() => searchStackTree(tree, url.sq ?? ''), [tree, url.sq]);
  const selected = url.snode === null ? undefined : tree.nodes[url.snode];

  // The rows shown: depth-first, children of collapsed nodes hidden (a search opens the paths to its hits).
  const rows = useMemo(() => {
    const out: StackNode[] = [];
    const stack = [...tree.roots].reverse();
    while (stack.length > 0) {
      const n = tree.nodes[stack.pop() ?? 0];
      if (n === undefined) continue;
      out.push(n);
      if (collapsed.has(n.id) && !found.onPath.has(n.id)) continue;
      for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i] ?? 0);
    }
    return out;
  }, [tree, collapsed, found]);

  const toggle = (id: number) =>
    setCollapsed((c) => {
      const next = new Set(c);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });
  const select = (n: StackNode) => setUrl({ snode: n.id, ranks: n.ranks, cell: null }, 'replace');

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
              placeholder="Find a function (e.g. MPI_Barrier)"
              value={query}
              onChange={(e) => {
                setQuery(e.target.value);
                setUrl({ sq: e.target.value.trim() === '' ? null : e.target.value.trim() }, 'replace');
              }}
              aria-label="Find a function"
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
          <button type="button" onClick={() => setCollapsed(new Set())}>
            Expand all
          </button>
          <span className="muted" data-testid="stacks-summary">
            {plural(tree.rankCount, 'rank')}
            {tree.threads === 'all' ? `, ${plural(tree.threadCount, 'thread')}` : ''},{' '}
            {plural(tree.classTotal, 'distinct stack')}
            {url.sq ? ` · ${plural(found.matches.size, 'match', 'matches')}` : ''}
            {tree.missing !== '' ? ` · no stacks: ${shortRanges(tree.missing)}` : ''}
          </span>
        </div>
        <div className="stack-tree" role="tree" aria-label="Merged stacks" data-testid="stacks-tree">
          {rows.map((n) => {
            const open = !collapsed.has(n.id) || found.onPath.has(n.id);
            const classes = [
              'stack-node',
              found.matches.has(n.id) ? 'match' : '',
              n.id === url.snode ? 'selected' : '',
              isMpiFrame(n.function) ? 'mpi' : '',
            ]
              .filter(Boolean)
              .join(' ');
            return (
              <div
                key={n.id}
                className={classes}
                role="treeitem"
                tabIndex={-1}
                aria-level={n.depth + 1}
                aria-expanded={n.children.length > 0 ? open : undefined}
                aria-selected={n.id === url.snode}
                style={{ paddingLeft: `${n.depth * 16 + 4}px` }}
                data-testid="stack-node"
                data-function={n.function}
                data-ranks={n.ranks}
                data-count={n.rankCount}
              >
                <button
                  type="button"
                  className="twisty"
                  disabled={n.children.length === 0}
                  onClick={() => toggle(n.id)}
                  aria-label={open ? 'Collapse' : 'Expand'}
                >
                  {n.children.length === 0 ? '·' : open ? '▾' : '▸'}
                </button>
                <button type="button" className="frame" onClick={() => select(n)} title={n.module ?? ''}>
                  <span className="count">{formatCount(n.rankCount)}</span>
                  <span className="ranges">[{shortRanges(n.ranks)}]</span>
                  <span className="fn">{n.function}</span>
                  {n.module !== null && <span className="module muted">{n.module}</span>}
                </button>
              </div>
            );
          })}
        </div>
      </section>
      <aside className="panel stack-detail" aria-label="Selected frame">
        {selected ? (
          <NodeDetail tree={tree} node={selected} setUrl={setUrl} snapshot={snapshot} />
        ) : (
          <p className="muted">Click a frame to select the ranks whose stacks pass through it.</p>
        )}
        <h3>Distinct stacks</h3>
        <ul className="stack-classes" data-testid="stack-classes">
          {tree.classes.slice(0, 30).map((c) => (
            <li key={c.leaf}>
              <button
                type="button"
                className="link"
                onClick={() => setUrl({ snode: c.leaf, ranks: c.ranks, cell: null }, 'replace')}
              >
                {formatCount(c.rankCount)} [{c.ranks.length > 24 ? `${c.ranks.slice(0, 23)}…` : c.ranks}]
              </button>{' '}
              <span className="muted">{classLabel(c.frames)}</span>
            </li>
          ))}
        </ul>
        {tree.classTotal > 30 && <p className="muted">{tree.classTotal - 30} more.</p>}
        {tree.outliers !== '' && (
          <p>
            Outliers: <code>{shortRanges(tree.outliers)}</code>
          </p>
        )}
      </aside>
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
    const out: string[] = [];
    for (let p: StackNode | undefined = node; p !== undefined; p = tree.nodes[p.parent])
      out.unshift(p.function);
    return out;
  }, [tree, node]);
  // The OpenMP state of each thread through this frame (ThreadStack.ompState), when OMPD read them.
  const ompStates = useMemo(
    () => ompStatesThrough(snapshot, path, tree.threads),
    [snapshot, path, tree.threads],
  );
  return (
    <div data-testid="stack-selected" data-function={node.function} data-ranks={node.ranks}>
      <h3>{node.function}</h3>
      <p className="muted">{node.module ?? 'no module'}</p>
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
      <p className="muted stack-path">{path.join(' › ')}</p>
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
