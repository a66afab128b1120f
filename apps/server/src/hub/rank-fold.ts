// What a stored snapshot needs of each rank, made as the rank's chunk arrives so the parsed rank
// can go: its fold (counts and its line of the queue digest, fanout.ts summaryOf).
//
// Between aggregator instances (cluster/cluster-hub.ts) a snapshot's chunks read by an agent on
// another instance can cross already folded: the instance holding the agent folds the chunk and
// deflates its JSON as sent (gzip-splice.ts deflatePart), and the asking instance only joins
// them. The chunk's JSON is then parsed once in the cluster, where it arrived, and deflated there;
// what crosses PostgreSQL is the deflated bytes and the folds, not the chunk's text.
import { inflateRawSync } from 'node:zlib';
import { opStateFields, QUEUE_KINDS, type RankSnapshot } from '@mqd/model';
import { type DeflatedPart, deflateRawAsync, inflatePart } from './gzip-splice.js';

/** What the summary needs of one rank: made as its chunk arrives, so the rank can go. */
export interface RankFold {
  readonly rank: number;
  readonly kind: RankSnapshot['state']['kind'];
  /** The state's error code; null for a rank read. */
  readonly code: string | null;
  /** The rank's line of the digest. */
  readonly line: string;
  readonly pendingSends: number;
  readonly pendingReceives: number;
  readonly unexpected: number;
  /**
   * The queue kinds (bit i = QUEUE_KINDS[i]) the rank's library showed on some communicator, and
   * those it left null (cannot show) on some: a kind null and never shown is unknown, not 0.
   */
  readonly shownQueues: number;
  readonly nullQueues: number;
}

export function rankFold(r: RankSnapshot): RankFold {
  const s = r.state;
  const code = s.kind === 'ok' ? null : s.code;
  let pendingSends = 0;
  let pendingReceives = 0;
  let unexpected = 0;
  let shownQueues = 0;
  let nullQueues = 0;
  // Parts joined once: a line built with += is a tree of pieces, kept for the whole fan-in (at
  // 100,000 ranks, ~200 MB more heap to collect than the flat lines).
  const parts = [`${r.rank}|${s.kind}|${code ?? ''}`];
  for (const c of r.communicators) {
    parts.push(`|c${c.id}:${c.size}:${c.localRank}`);
    for (const [i, q] of QUEUE_KINDS.entries()) {
      const ops = c[q];
      parts.push(`|${q[0]}`);
      if (ops === null) {
        nullQueues |= 1 << i;
        parts.push('null');
        continue;
      }
      shownQueues |= 1 << i;
      for (const o of ops) {
        if (q === 'unexpected') unexpected++;
        else if (o.status === 'pending') {
          if (q === 'sends') pendingSends++;
          else pendingReceives++;
        }
        parts.push(`;${opStateFields(o)}`);
      }
    }
  }
  const line = parts.join('');
  return {
    rank: r.rank,
    kind: s.kind,
    code,
    line,
    pendingSends,
    pendingReceives,
    unexpected,
    shownQueues,
    nullQueues,
  };
}

/**
 * The ranks of a chunk's JSON as its agent sent it (the ranks' texts joined by commas, no
 * brackets). Parsed as they are: the instance that had them as sent checked them.
 */
export function ranksOfText(text: Buffer): RankSnapshot[] {
  return JSON.parse(`[${text.toString('utf8')}]`) as RankSnapshot[];
}

/** The ranks of a chunk deflated as sent (a FoldedRanks part, or a run the fan-in kept). */
export function ranksOfPart(part: DeflatedPart): RankSnapshot[] {
  return ranksOfText(inflatePart(part));
}

/** A chunk of ranks folded and deflated where it arrived: its ranks' folds and their JSON's deflate. */
export interface FoldedRanks {
  /** One per rank of the chunk, in the chunk's order. */
  readonly folds: readonly RankFold[];
  /** The chunk's JSON as its agent sent it (the ranks' texts joined by commas), deflated. */
  readonly part: DeflatedPart;
}

/**
 * A snapshot's ask to have chunks read elsewhere come folded (AgentHub.snapshot's last argument):
 * the level to deflate at (the asker's --gzip-level, so the stored body is as if deflated here),
 * and where they go. Chunks that cannot be folded still go to onRanks.
 */
export interface FoldRequest {
  readonly level: number;
  readonly onFolded: (chunk: FoldedRanks) => void;
}

/** Whether `x` is a fold as rankFold makes it (a chunk from another instance is checked). */
function isRankFold(x: unknown): x is RankFold {
  if (typeof x !== 'object' || x === null) return false;
  const f = x as Record<string, unknown>;
  return (
    Number.isSafeInteger(f.rank) &&
    typeof f.kind === 'string' &&
    (f.code === null || typeof f.code === 'string') &&
    typeof f.line === 'string' &&
    Number.isSafeInteger(f.pendingSends) &&
    Number.isSafeInteger(f.pendingReceives) &&
    Number.isSafeInteger(f.unexpected) &&
    Number.isSafeInteger(f.shownQueues) &&
    Number.isSafeInteger(f.nullQueues)
  );
}

/** A fold as it crosses between instances: its fields in RankFold's order, no keys. */
type FoldTuple = [number, string, string | null, string, number, number, number, number, number];

/**
 * Folds for the wire: JSON of tuples, deflated in the thread pool. The digest lines are most of a
 * fold (~250 bytes a rank) and repeat from rank to rank: deflated, a chunk's folds are a few KB,
 * not the ~30 KB they take as MessagePack strings (at 100,000 ranks).
 */
export function encodeFolds(folds: readonly RankFold[], level: number): Promise<Buffer> {
  const tuples: FoldTuple[] = folds.map((f) => [
    f.rank,
    f.kind,
    f.code,
    f.line,
    f.pendingSends,
    f.pendingReceives,
    f.unexpected,
    f.shownQueues,
    f.nullQueues,
  ]);
  return deflateRawAsync(Buffer.from(JSON.stringify(tuples)), { level });
}

/** The folds encodeFolds made, or null when `bytes` are not such folds. */
export function decodeFolds(bytes: Uint8Array): RankFold[] | null {
  let tuples: unknown;
  try {
    tuples = JSON.parse(inflateRawSync(bytes).toString('utf8'));
  } catch {
    return null;
  }
  if (!Array.isArray(tuples)) return null;
  const folds: RankFold[] = [];
  for (const t of tuples) {
    // Seven fields: an instance that does not tell the queues it could read (all read, as before).
    if (!Array.isArray(t) || (t.length !== 7 && t.length !== 9)) return null;
    const [
      rank,
      kind,
      code,
      line,
      pendingSends,
      pendingReceives,
      unexpected,
      shownQueues = 0,
      nullQueues = 0,
    ] = t as unknown[];
    const f = { rank, kind, code, line, pendingSends, pendingReceives, unexpected, shownQueues, nullQueues };
    if (!isRankFold(f)) return null;
    folds.push(f);
  }
  return folds;
}
