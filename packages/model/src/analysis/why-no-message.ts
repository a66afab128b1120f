// Why the message a dead-end receive waits for never came, from what the snapshot shows (the
// last sentence of a dead-end line, diagnosis.ts).

import { capitalRank, commName, type DiagnosisPart, placePart, rankLink, text } from './diagnosis-parts.js';
import type { SnapshotIndex } from './snapshot-index.js';
import type { RankWait } from './wait-graph.js';

/** Tags match when either side is MPI_ANY_TAG (null). */
function tagsMatch(want: number | null, got: number | null): boolean {
  return want === null || got === null || want === got;
}

/**
 * Why the message a dead-end receive waits for never came, from what the snapshot shows: a
 * message from that peer with another tag or on another communicator (unexpected at the waiter,
 * or a send still pending at the peer), a receive from MPI_ANY_SOURCE that took it (a message
 * race), the same message sent to another rank; else that no queue shows a send, and whether
 * the library could have shown one.
 */
export function whyNoMessage(
  ix: SnapshotIndex,
  from: number,
  to: number,
  w: RankWait,
  tag: number | null,
): DiagnosisPart[] {
  const want = w.op;
  const peer = rankLink(ix, ix.rankOf[to] ?? 0, `rank ${ix.rankOf[to] ?? 0}`);
  const waiter = ix.rankOf[from] ?? 0;
  const keyId = want.commKey === '' ? -1 : ix.keyIdOf(want.commKey);
  const commOf = (ce: { comm: { name: string } }) => commName(ce.comm.name);
  let hidden = false;
  // 1. Near misses at the waiter: unexpected messages from the peer.
  for (let ci = ix.commStart[from] ?? 0; ci < (ix.commStart[from + 1] ?? 0); ci++) {
    const ce = ix.comms[ci];
    if (ce === undefined || ce.internal) continue;
    if (ce.comm.unexpected === null) hidden = true;
    for (const u of ce.comm.unexpected ?? []) {
      if (ix.peerIdx(u.peer, ce) !== to) continue;
      const sameComm = keyId < 0 || ce.keyId === keyId;
      if (sameComm && tagsMatch(tag, u.tag)) continue;
      const sent = u.tag === null ? '' : ` with tag ${u.tag}`;
      return [
        text(' '),
        capitalRank(peer),
        text(`'s message${sent}`),
        ...(sameComm ? [] : [text(' on '), commOf(ce)]),
        text(` is unexpected at rank ${waiter}: it differs in ${sameComm ? 'tag' : 'communicator'}.`),
      ];
    }
  }
  // 2. The peer's pending sends to the waiter with another tag or communicator.
  for (let ci = ix.commStart[to] ?? 0; ci < (ix.commStart[to + 1] ?? 0); ci++) {
    const ce = ix.comms[ci];
    if (ce === undefined || ce.internal) continue;
    for (const s of ce.comm.sends ?? []) {
      if (s.status !== 'pending' || ix.peerIdx(s.peer, ce) !== from) continue;
      const sameComm = keyId < 0 || ce.keyId === keyId;
      if (sameComm && tagsMatch(tag, s.tag)) continue;
      return [
        text(' '),
        capitalRank(peer),
        text(`'s send to rank ${waiter}${s.tag === null ? '' : ` with tag ${s.tag}`}`),
        ...(sameComm ? [] : [text(' on '), commOf(ce)]),
        text(` is pending: it differs in ${sameComm ? 'tag' : 'communicator'}.`),
      ];
    }
  }
  // 3. A message race: a receive from MPI_ANY_SOURCE at the waiter already matched the peer's message.
  for (let ci = ix.commStart[from] ?? 0; ci < (ix.commStart[from + 1] ?? 0); ci++) {
    const ce = ix.comms[ci];
    if (ce === undefined || ce.internal || (keyId >= 0 && ce.keyId !== keyId)) continue;
    for (const r of ce.comm.receives ?? []) {
      if (r.status === 'pending' || r.peer.local !== null || !tagsMatch(tag, r.tag)) continue;
      const actual = r.actual === null ? -1 : ix.peerIdx(r.actual.peer, ce);
      if (actual !== to) continue;
      return [
        text(
          ` A message race: rank ${waiter}'s receive from any source${r.tag === null ? '' : ` (tag ${r.tag})`} took `,
        ),
        peer,
        text(
          `'s message${r.actual?.tag === null || r.actual?.tag === undefined ? '' : ` (tag ${r.actual.tag})`} first, so this receive waits for a second one that is never sent.`,
        ),
      ];
    }
  }
  // 3b. The peer lists the very send as done, yet the receive it would match still waits: Open
  // MPI marks an inactive persistent request (MPI_Send_init, never MPI_Start) complete.
  for (let ci = ix.commStart[to] ?? 0; ci < (ix.commStart[to + 1] ?? 0); ci++) {
    const ce = ix.comms[ci];
    if (ce === undefined || ce.internal || (keyId >= 0 && ce.keyId !== keyId)) continue;
    for (const s of ce.comm.sends ?? []) {
      if (s.status === 'pending' || ix.peerIdx(s.peer, ce) !== from || !tagsMatch(tag, s.tag)) continue;
      return [
        text(' '),
        capitalRank(peer),
        text(
          ` lists a send to rank ${waiter}${s.tag === null ? '' : ` with tag ${s.tag}`} that this receive would match as ${s.status}, yet the receive still waits: a send that was never started (a persistent MPI_Send_init without MPI_Start) reads so, as does a message an earlier receive took.`,
        ),
      ];
    }
  }
  // 4. The message went elsewhere: another rank holds it unexpected, or the peer's send to another rank is pending.
  for (const ce of ix.comms) {
    if (ce.internal || ce.rankIdx === from || (keyId >= 0 && ce.keyId !== keyId)) continue;
    for (const u of ce.comm.unexpected ?? []) {
      if (ix.peerIdx(u.peer, ce) !== to || !tagsMatch(tag, u.tag)) continue;
      return [
        text(' '),
        capitalRank(peer),
        text(`'s message${u.tag === null ? '' : ` with tag ${u.tag}`} is unexpected at `),
        rankLink(ix, ce.rank, `rank ${ce.rank}`),
        text(`: sent to the wrong rank.`),
      ];
    }
  }
  const senders = ix.comms.filter((ce) => ce.rankIdx === to && !ce.internal);
  const sendsHidden = senders.some((ce) => ce.comm.sends === null);
  if (hidden || sendsHidden) {
    return [
      text(' No queue shows a message from '),
      peer,
      text(
        ` to rank ${waiter}, but ${hidden ? 'this library shows no unexpected messages' : "the sender's send queue is not visible"}: one with another tag or communicator may have arrived unseen.`,
      ),
    ];
  }
  // Nothing is queued anywhere: the peer got where it is without that send (or an earlier
  // receive, now complete and gone from the queues, took the message).
  const there = placePart(ix, ix.rankOf[to] ?? 0);
  return [
    text(' No queue holds a message from '),
    peer,
    text(` to rank ${waiter} with any tag: `),
    { ...peer, text: `rank ${ix.rankOf[to] ?? 0}` },
    text(' reached '),
    ...(there === null ? [text('where it is')] : [there]),
    text(' without sending it, or an earlier receive took it.'),
  ];
}
