// What a holder sends one asker of folded snapshots (FoldedOutbox), and how folded chunks from
// another instance are passed on once (passFoldedOnce). Used by ClusterHub (cluster-hub.ts).
import type { RankSnapshot } from '@mqd/model';
import { deflatePart } from '../hub/gzip-splice.js';
import { encodeFolds, type FoldedRanks, rankFold, ranksOfPart } from '../hub/rank-fold.js';
import type { FoldedBatchMessage, ReplyMessage } from './cluster-wire.js';

/** Ranks passed on from another instance, with their text when it crossed as sent. */
export type PassRanks = (ranks: readonly RankSnapshot[], text?: Buffer) => void;

/** A holder sends its folded chunks when this many of their bytes wait (text and folds, deflated)... */
const FOLDED_BATCH_BYTES = 256 * 1024;
/** ...or this long after the first one waits: live progress still moves several times a second. */
const FOLDED_BATCH_MS = 25;

/**
 * What a holder sends one asker for its snapshots to be stored: each chunk is folded at once (its
 * ranks can go) and deflated in the thread pool, then queued; a call's reply is queued once its
 * chunks are. What waits is sent in one message when FOLDED_BATCH_BYTES wait or FOLDED_BATCH_MS
 * after the first: the calls of one fan-out (one per host) share the batches.
 */
export class FoldedOutbox {
  private items: FoldedBatchMessage['items'][number][] = [];
  private bytes = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Calls whose reply is not queued yet (ClusterHub.servingSnapshot while any is). */
  private calls = 0;

  get active(): number {
    return this.calls;
  }

  constructor(
    private readonly send: (items: FoldedBatchMessage['items']) => void,
    private readonly idle: () => void,
  ) {}

  /** Call `id`'s chunks: `sent.chunks` counts those queued. */
  call(
    id: string,
    level: number,
    sent: { chunks: number },
  ): { add(ranks: readonly RankSnapshot[], text: Buffer): void; done(): Promise<void> } {
    this.calls++;
    const deflating = new Set<Promise<void>>();
    let failure: unknown = null;
    return {
      add: (ranks, text) => {
        const folds = encodeFolds(ranks.map(rankFold), level);
        const p = Promise.all([folds, deflatePart(text, level)]).then(
          ([f, part]) => {
            sent.chunks++;
            this.queue(
              { id, chunk: { folds: f, deflated: part.deflated, crc: part.crc, length: part.length } },
              f.length + part.deflated.length,
            );
          },
          (e: unknown) => {
            failure ??= e;
          },
        );
        deflating.add(p);
        void p.finally(() => deflating.delete(p));
      },
      /** Waits for every chunk added to be queued; throws when one could not be. */
      done: async () => {
        while (deflating.size > 0) await Promise.all(deflating);
        if (failure !== null) throw failure;
      },
    };
  }

  /** A call's reply, after its chunks (call().done() was awaited, or the call failed). */
  reply(m: ReplyMessage): void {
    this.calls--;
    this.queue({ reply: m }, 256);
  }

  close(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.items = [];
  }

  private queue(item: FoldedBatchMessage['items'][number], bytes: number): void {
    this.items.push(item);
    this.bytes += bytes;
    if (this.bytes >= FOLDED_BATCH_BYTES) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), FOLDED_BATCH_MS);
  }

  private flush(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    this.bytes = 0;
    this.send(items);
    if (this.calls === 0) this.idle();
  }
}

/**
 * onFolded behind the ranks passed on so far (`seen`, shared with passOnce): a folded chunk
 * goes on as it is when none of its ranks was passed yet; otherwise its ranks come back from its
 * bytes and the new ones go the way of unfolded ranks (a retry on another instance after its
 * holder died).
 */
export function passFoldedOnce(
  seen: Set<number>,
  pass: PassRanks,
  onFolded: (c: FoldedRanks) => void,
): (c: FoldedRanks) => void {
  return (c) => {
    if (c.folds.some((f) => seen.has(f.rank))) {
      pass(ranksOfPart(c.part));
      return;
    }
    for (const f of c.folds) seen.add(f.rank);
    onFolded(c);
  };
}
