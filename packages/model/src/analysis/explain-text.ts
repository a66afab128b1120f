// An explanation in words: the summary's headline and lead (summarize, used by explainSnapshot)
// and the plain-text report the CLI prints (formatExplanation).
import { assertUnreachable } from '../assert.js';
import { callKind } from '../mpi/calls.js';
import { jobText, ranksPhrase as ranksText } from '../text.js';
import { type CollectiveMismatch, commPhrase, describeCallGroup } from './call-facts.js';
import type { Explanation } from './explain-types.js';
import type { NearMiss } from './near-miss.js';
import { compressRanks } from './ranges.js';
import type { DeadlockCycle, EdgeEvidence, WaitAnalysis, WaitEdgeOp } from './wait-graph.js';

const ARROW = ' -> ';

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function cyclePath(ranks: readonly number[]): string {
  const first = ranks[0] ?? 0;
  if (ranks.length <= 8) return [...ranks, first].join(ARROW);
  return [...ranks.slice(0, 3), '...', ...ranks.slice(-2), first].join(ARROW);
}

/** Each kind of evidence in words, singular and plural. */
const EVIDENCE_WORDS: Record<EdgeEvidence, [string, string]> = {
  send: ['pending send', 'pending sends'],
  receive: ['pending receive', 'pending receives'],
  'wildcard-receive': ['receive from any rank', 'receives from any rank'],
  'inferred-from-unexpected': [
    'send inferred from an unexpected message',
    'sends inferred from unexpected messages',
  ],
  call: ['blocking call', 'blocking calls'],
  'collective-call': ['collective', 'collectives'],
  'send-in-call': ['send still waiting for its match', 'sends still waiting for their match'],
  'receive-in-call': ['receive still waiting in its call', 'receives still waiting in their call'],
};

/** "2 pending receives", "4 blocking calls": what the cycle's waits rest on. */
function evidenceCounts(c: DeadlockCycle): string {
  const counts = new Map<EdgeEvidence, number>();
  for (const e of c.edges)
    for (const op of e.ops) counts.set(op.evidence, (counts.get(op.evidence) ?? 0) + 1);
  return [...counts].map(([k, v]) => `${v} ${EVIDENCE_WORDS[k][v === 1 ? 0 : 1]}`).join(', ');
}

/** Whole seconds from one ISO time to another; null when either does not parse. */
function secondsBetween(from: string, to: string): number | null {
  const a = Date.parse(from);
  const b = Date.parse(to);
  return Number.isNaN(a) || Number.isNaN(b) ? null : Math.round((b - a) / 1000);
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function describeNearMiss(m: NearMiss): string {
  const c = m.candidates[0];
  if (c === undefined) return '';
  const what = m.kind === 'receive' ? 'receive' : 'send';
  const peer = m.peer === null ? (m.kind === 'receive' ? 'any source' : 'an unknown rank') : `rank ${m.peer}`;
  const dir = m.kind === 'receive' ? 'from' : 'to';
  const other =
    c.op.queue === 'unexpected'
      ? `an unexpected message from rank ${c.peer ?? '?'} (tag ${c.tag ?? 'any'}, ${commPhrase(c.op.commName)})`
      : c.op.queue === 'sends'
        ? `rank ${c.op.rank}'s send (tag ${c.tag ?? 'any'}, ${commPhrase(c.op.commName)})`
        : `rank ${c.op.rank}'s receive from ${c.peer === null ? 'any source' : `rank ${c.peer}`} (tag ${c.tag ?? 'any'}, ${commPhrase(c.op.commName)})`;
  const diff = c.wouldMatch ? 'would match but is still pending' : `differs in ${c.differs.join(', ')}`;
  return `rank ${m.op.rank}'s ${what} ${dir} ${peer} (tag ${m.tag ?? 'any'}, ${commPhrase(m.op.commName)}) vs ${other}: ${diff}`;
}

type Summary = Pick<Explanation, 'summary' | 'headline' | 'lead'>;

/** What the members of one collective disagree on, as the verdict says it. */
const DIFFERS_WORDS: Readonly<Record<NonNullable<CollectiveMismatch['differs']>, string>> = {
  root: 'the roots differ',
  signature: 'the type signatures (count × type size) differ',
  operation: 'the operations differ',
};

export function summarize(e: Omit<Explanation, keyof Summary>, w: WaitAnalysis): Summary {
  const parts: string[] = [];
  let headline = '';
  let lead = '';
  /** The verdict's statement: first in the summary, kept apart for views. */
  const head = (label: string, rest: string) => {
    headline = label;
    lead = rest;
    parts.push(`${label}: ${rest}`);
  };
  const last = e.progress.at(-1);
  switch (e.verdict) {
    case 'deadlock': {
      const d = e.deadlock;
      if (d === null) break;
      const c = d.cycles[0];
      const dead = e.diagnosis.deadEnd;
      if (c === undefined && dead !== null) {
        // No cycle: the waits end on ranks that will never act again.
        head('Deadlock', dead.text);
        parts.push(`${d.count} of ${e.rankCount} ranks can never proceed.`);
        break;
      }
      if (e.sendCycle) {
        // The sizes are the cause: say them first.
        head('Deadlock', e.sendCycle.text);
        parts.push(`${d.count} of ${e.rankCount} ranks can never proceed.`);
      } else head('Deadlock', `${d.count} of ${e.rankCount} ranks can never proceed.`);
      if (c !== undefined) {
        const more = d.cycleTotal > 1 ? ` (${d.cycleTotal} cycles; the first)` : '';
        const comp =
          c.componentSize > c.ranks.length ? `, among ${c.componentSize} mutually waiting ranks` : '';
        parts.push(
          `Cycle of ${plural(c.ranks.length, 'rank')}${more}: ${cyclePath(c.ranks)} (${evidenceCounts(c)}${comp}).`,
        );
        if (!c.certain) {
          parts.push(
            c.edges.some((x) => x.ops.some((o) => o.evidence === 'send-in-call'))
              ? 'Part of it rests on ranks blocked in a send the library already lists as done (an eager synchronous send waiting for its acknowledgement), so it is likely rather than certain.'
              : c.edges.some((x) => x.ops.some((o) => o.evidence === 'receive-in-call'))
                ? 'Part of it rests on ranks blocked in a receive the library already lists as done (its stacks show the thread still waiting in the call), so it is likely rather than certain.'
                : 'Part of it is inferred from unexpected messages whose senders cannot show their send queues, so it is likely rather than certain.',
          );
        }
      }
      if (d.cycles.length === 0) {
        parts.push('No cycle: they wait for ANY_SOURCE on communicators where no other rank could answer.');
      } else if (d.blockedBehind !== '') {
        parts.push(`Also blocked, waiting on the cycle: ${ranksText(d.blockedBehind)}.`);
      }
      // A collective that waits on the cycle's ranks is its consequence, not a second cause.
      for (const mm of e.collectiveMismatches.slice(0, 2)) {
        const inColl = mm.groups.filter(
          (g) => g.where === 'call' && g.blocking && callKind(g.call ?? '') === 'collective',
        );
        if (inColl.length === 0) continue;
        const who = inColl.map((g) => describeCallGroup(g)).join(', ');
        parts.push(
          `${capitalize(who)} ${inColl.length === 1 && inColl[0]?.rankCount === 1 ? 'waits' : 'wait'} for ranks held by the cycle: a consequence of the deadlock, not its cause.`,
        );
      }
      if (c !== undefined && dead !== null) parts.push(`Also: ${dead.text}`);
      break;
    }
    case 'collective-hang': {
      const mm = e.collectiveMismatches[0];
      if (mm !== undefined) {
        const on = mm.commName === null ? '' : ` on ${commPhrase(mm.commName)}`;
        const allBlocked = mm.groups.every((g) => g.where !== 'call' || g.blocking);
        const settled = mm.groups.every(
          (g) => g.where === 'unread' || g.where === 'exited' || (g.where === 'call' && g.blocking),
        );
        head(
          `Collective hang${on}`,
          mm.differs !== undefined
            ? `${mm.text}: ${DIFFERS_WORDS[mm.differs]}, so it can never complete.`
            : settled
              ? `${mm.text}; they can never meet.`
              : `${mm.text}; the collective cannot complete until the others enter it.`,
        );
        if (!(settled && allBlocked) && last === undefined) {
          parts.push('Ranks outside MPI may still get there: take another snapshot to confirm.');
        }
        if (e.collectiveMismatches.length > 1) {
          parts.push(
            `Also: ${e.collectiveMismatches
              .slice(1, 4)
              .map((x) => x.text)
              .join('; ')}.`,
          );
        }
        const d = e.deadlock?.cycles[0];
        if (d?.edges.some((x) => x.ops.some((o) => o.evidence !== 'collective-call'))) {
          parts.push(`The waits close a cycle through the collective: ${cyclePath(d.ranks)}.`);
        }
        break;
      }
      const c = e.collectives[0];
      if (c === undefined) break;
      const name = c.commName === '' ? 'an unnamed library communicator' : commPhrase(c.commName);
      head(
        'Collective hang',
        `${plural(c.rankCount, 'rank')} of ${c.commSize} (${c.ranks}) have collective traffic pending on ${name}.`,
      );
      if (c.waitingFor !== '') {
        parts.push(
          `They wait for ${ranksText(c.waitingFor)}, which show${/[-,]/.test(c.waitingFor) ? '' : 's'} no collective traffic: likely not in the collective (blocked elsewhere or computing).`,
        );
      }
      if (c.lateWaitOn !== '') {
        parts.push(
          `Those in turn wait in point-to-point operations for ${ranksText(c.lateWaitOn)}, inside the collective: a cycle through the collective.`,
        );
      }
      if (last === undefined)
        parts.push('One snapshot cannot show that it does not move: take another to confirm.');
      else parts.push(`Nothing moved between ${last.from} and ${last.to}.`);
      break;
    }
    case 'openmp-hang': {
      const o = e.openmp;
      const n = o.deadlockedRanks.length;
      head(
        'OpenMP deadlock',
        `${n} of ${e.rankCount} ranks can never proceed: on ${ranksText(o.deadlocked)} every OpenMP thread waits (for a lock, at a barrier, for tasks), none runs and none is in an MPI call, so nothing can release ${n === 1 ? 'it' : 'them'}.`,
      );
      const stuck = o.groups.filter((g) => g.block === 'openmp').map((g) => g.text);
      if (stuck.length > 0) parts.push(`${capitalize(stuck.slice(0, 3).join('; '))}.`);
      if (e.behindOpenMp !== '') {
        const one = !/[-,]/.test(e.behindOpenMp);
        parts.push(
          `${capitalize(ranksText(e.behindOpenMp))} ${one ? 'waits' : 'wait'} in MPI for ${n === 1 ? 'it' : 'them'}: blocked behind the OpenMP deadlock.`,
        );
      }
      break;
    }
    case 'stuck': {
      if (last === undefined) {
        // One snapshot, every rank blocked, and no rule proves why: say what is known.
        head(
          'Stuck',
          `every rank is blocked in an MPI call and none can act to release the others, though no rule here proves a deadlock.`,
        );
        if (e.rootsUnread !== '') {
          parts.push(
            `The root argument could not be read on ${ranksText(e.rootsUnread)} (the MPI library keeps it optimised out): members that disagree on the root cannot be told from a collective still running.`,
          );
        }
        parts.push('Take another snapshot: if nothing moves, the job is hung.');
        break;
      }
      const secs = secondsBetween(last.from, last.to);
      head(
        'Stuck',
        `${plural(last.counts.pendingAfter, 'operation')} pending and nothing moved between ${last.from} and ${last.to}${secs === null ? '' : ` (${secs} s)`}.`,
      );
      if (e.allBlocked)
        parts.push('Every rank is blocked in an MPI call: none can act to release the others.');
      break;
    }
    case 'progressing': {
      if (last === undefined) break;
      const k = last.counts;
      head(
        'Progressing',
        `between ${last.from} and ${last.to}, ${k.appeared} operations appeared, ${k.disappeared} disappeared and ${k.changed} changed status, on ${plural(last.movedRanks, 'rank')}.`,
      );
      if (last.stuckRanks.length > 0) {
        parts.push(`Nothing moved on ${ranksText(compressRanks(last.stuckRanks))}, which still wait.`);
      }
      break;
    }
    case 'idle':
      head(
        'Idle',
        last === undefined
          ? 'no rank waits in a visible MPI operation (computing, finished, or blocked where the queues cannot show it).'
          : `nothing pending in the snapshots of ${last.from} and ${last.to}.`,
      );
      break;
    case 'unknown':
      if (w.rankCount - w.unknownRanks.length === 0) head('Unknown', 'no rank could be read.');
      else {
        const free = e.waits.waitingOnFree !== '' ? e.waits.waitingOnFree : e.computing;
        const one = !/[-,]/.test(free);
        const waiting = w.waitingRanks === 1 ? '1 rank waits' : `${w.waitingRanks} ranks wait`;
        head(
          `No deadlock${e.partial ? ' among the readable ranks' : ''}`,
          free === '' && e.completing !== ''
            ? `${capitalize(ranksText(e.completing))} ${/[-,]/.test(e.completing) ? 'are' : 'is'} in a collective every member has entered: it can complete.`
            : free === ''
              ? `${waiting}, but every wait can still be satisfied.`
              : `${waiting}, but ${ranksText(free)} can still act (${one ? 'it is' : 'they are'} not blocked in MPI) and satisfy ${w.waitingRanks === 1 ? 'it' : 'them'}.`,
        );
        parts.push('One snapshot cannot tell a hang from a slow job: take another to compare.');
      }
      break;
    default:
      assertUnreachable(e.verdict);
  }
  // The counter the user named outranks what the waits suggest: right after the verdict.
  if (e.progressCounter !== undefined) parts.push(`${e.progressCounter.line.text}.`);
  if (e.openmp.lines.length > 0) {
    const o = e.openmp;
    const lines =
      e.verdict === 'openmp-hang'
        ? o.groups.filter((g) => g.block !== 'openmp').map((g) => g.text)
        : o.groups.map((g) => g.text);
    if (lines.length > 0) {
      const more = o.groupTotal > 4 ? `; ${o.groupTotal - Math.min(4, lines.length)} more groups` : '';
      parts.push(`OpenMP threads: ${lines.slice(0, 4).join('; ')}${more}.`);
    }
    if (o.waitOnMpi !== '') {
      const one = !/[-,]/.test(o.waitOnMpi);
      parts.push(
        `On ${ranksText(o.waitOnMpi)} the other OpenMP threads wait (at a barrier, in taskwait, for a lock) for the thread in the MPI call: ${one ? 'the rank is' : 'the ranks are'} held by that call, not by OpenMP.`,
      );
    }
    if (e.verdict !== 'openmp-hang' && o.deadlocked !== '') {
      parts.push(
        `OpenMP deadlock on ${ranksText(o.deadlocked)} as well: no thread there runs or is in an MPI call${e.behindOpenMp === '' ? '' : `; ${ranksText(e.behindOpenMp)} wait in MPI for ${/[-,]/.test(o.deadlocked) ? 'them' : 'it'}`}.`,
      );
    }
  }
  if (e.calls.length > 0 && e.verdict !== 'collective-hang') {
    const shown = e.calls.slice(0, 4).map((g) => describeCallGroup(g));
    const more = e.calls.length > 4 ? `; ${e.calls.length - 4} more groups` : '';
    parts.push(`Stacks: ${shown.join('; ')}${more}.`);
  }
  if (e.dependsOnUnknown !== '') {
    parts.push(`If the unread ranks are blocked, ${ranksText(e.dependsOnUnknown)} would be deadlocked too.`);
  }
  if (e.verdict !== 'idle' && e.waits.waitingOnFree !== '') {
    const one = !/[-,]/.test(e.waits.waitingOnFree);
    parts.push(
      `Waits lead to ${ranksText(e.waits.waitingOnFree)}, which ${one ? 'is' : 'are'} not blocked in any visible operation (computing, or blocked where the queues cannot show it).`,
    );
  }
  const m = e.nearMisses[0];
  if (m !== undefined) {
    parts.push(
      `Near miss${e.nearMissTotal > 1 ? ` (1 of ${e.nearMissTotal})` : ''}: ${describeNearMiss(m)}.`,
    );
  }
  const big = e.classes[0];
  if (big !== undefined && e.rankCount > 1) {
    parts.push(
      e.classTotal === 1
        ? `All ${e.rankCount} ranks have the same queue shape.`
        : `Ranks fall into ${e.classTotal} queue shapes; the largest has ${plural(big.size, 'rank')} (${ranksText(big.ranks)})${e.outliers ? `; outliers: ${ranksText(e.outliers)}` : ''}.`,
    );
  }
  if (e.partial) parts.push(`Partial: ${e.partialReasons.join('; ')}.`);
  return { summary: parts.join(' '), headline, lead };
}

const MAX_EDGES_SHOWN = 6;

/** The operations behind one wait, for the CLI's details. */
function opsText(ops: readonly WaitEdgeOp[]): string {
  return ops
    .map((o) =>
      o.call === undefined
        ? `${o.evidence} ${commPhrase(o.commName)} ${o.queue}[${o.index}]@${o.rank} tag ${o.tag ?? 'any'}`
        : // A call's tag comes from its frame: null there is MPI_ANY_TAG or unreadable
          // (MPICH keeps a blocking call's tag only as an entry value), so say "?"; a
          // collective has none.
          `${o.evidence} ${jobText(o.call)}@${o.rank}${o.index >= 0 ? ` (${commPhrase(o.commName)} ${o.queue}[${o.index}])` : ''}${o.evidence === 'collective-call' ? '' : ` tag ${o.tag ?? '?'}`}`,
    )
    .join('; ');
}

/** Plain text for the CLI: the summary first, then the details, each list cut short. */
export function formatExplanation(e: Explanation): string {
  const out: string[] = [];
  out.push(
    `verdict: ${e.verdict}${e.partial ? ' (partial)' : ''}  [${e.rankCount} ranks, ${e.library}, ${e.takenAt}]`,
  );
  out.push(e.summary);
  if (e.progressCounter !== undefined) out.push(e.progressCounter.line.text);
  if (e.diagnosis.cycle !== null || e.diagnosis.groups.length > 0) {
    out.push('where the ranks are:');
    if (e.diagnosis.cycle !== null) out.push(`  ${e.diagnosis.cycle.text}`);
    for (const g of e.diagnosis.groups) out.push(`  ${g.text}`);
    if (e.diagnosis.groupTotal > e.diagnosis.groups.length)
      out.push(`  ... ${e.diagnosis.groupTotal - e.diagnosis.groups.length} more groups`);
  }
  for (const r of e.partialReasons) out.push(`partial: ${r}`);
  for (const l of e.limits) out.push(`limit: ${l.text}`);
  if (e.deadlock) {
    out.push(`deadlocked ranks (${e.deadlock.count}): ${e.deadlock.ranks}`);
    e.deadlock.cycles.forEach((c, i) => {
      out.push(
        `cycle ${i + 1}: ${plural(c.ranks.length, 'rank')}${c.certain ? '' : ' (partly inferred)'}: ${cyclePath(c.ranks)}`,
      );
      for (const edge of c.edges.slice(0, MAX_EDGES_SHOWN)) {
        out.push(`  ${edge.from} -> ${edge.to}: ${opsText(edge.ops)}`);
      }
      if (c.edges.length > MAX_EDGES_SHOWN) out.push(`  ... ${c.edges.length - MAX_EDGES_SHOWN} more edges`);
    });
    for (const d of e.deadlock.deadEnds) {
      const why = d.reason === 'final' ? 'in MPI_Finalize or MPI_Abort' : 'exited';
      out.push(`dead end: ${d.from} -> ${d.to} (${why}): ${opsText(d.ops)}`);
    }
    if (e.deadlock.deadEndTotal > e.deadlock.deadEnds.length) {
      out.push(`... ${e.deadlock.deadEndTotal - e.deadlock.deadEnds.length} more dead ends`);
    }
    if (e.deadlock.cycleTotal > e.deadlock.cycles.length) {
      out.push(`... ${e.deadlock.cycleTotal - e.deadlock.cycles.length} more cycles`);
    }
    if (e.deadlock.blockedBehind) {
      const behind =
        e.deadlock.cycles.length === 0 && e.deadlock.deadEnds.length > 0 ? 'dead ends' : 'cycles';
      out.push(`blocked behind the ${behind}: ${e.deadlock.blockedBehind}`);
    }
  }
  if (e.dependsOnUnknown) out.push(`deadlocked if the unread ranks are blocked: ${e.dependsOnUnknown}`);
  for (const c of e.collectives) {
    out.push(
      `collective in progress on ${commPhrase(c.commName)}/${c.commSize}: ranks ${c.ranks}${c.waitingFor ? `; waiting for ${c.waitingFor}` : ''}${c.lateWaitOn ? `, which wait in p2p for ${c.lateWaitOn}` : ''}`,
    );
  }
  for (const m of e.collectiveMismatches) {
    out.push(
      `collective mismatch on ${m.commName === null ? 'an unknown communicator' : commPhrase(m.commName)}:`,
    );
    for (const g of m.groups) out.push(`  ${describeCallGroup(g)}`);
  }
  if (e.calls.length > 0) {
    out.push(`in MPI calls (stacks, ${plural(e.calls.length, 'group')}):`);
    for (const g of e.calls.slice(0, 8)) out.push(`  ${describeCallGroup(g)}`);
    if (e.calls.length > 8) out.push(`  ... ${e.calls.length - 8} more groups`);
  }
  if (e.openmp.lines.length > 0) {
    out.push('openmp:');
    for (const l of e.openmp.lines) out.push(`  ${l}`);
    if (e.behindOpenMp) out.push(`  waiting in MPI for the OpenMP deadlock: ${e.behindOpenMp}`);
  }
  if (e.nearMissTotal > 0) {
    out.push(`near misses (${e.nearMissTotal}):`);
    for (const m of e.nearMisses.slice(0, 5)) {
      out.push(`  ${describeNearMiss(m)}`);
      for (const note of m.notes) out.push(`    note: ${note}`);
    }
    if (e.nearMissTotal > 5) out.push(`  ... ${e.nearMissTotal - 5} more`);
  }
  out.push(
    `queue shapes (${e.classTotal}, peers ${e.classPeers === 'relative' ? 'as +offset' : 'as =local rank'}):`,
  );
  for (const c of e.classes.slice(0, 5)) {
    out.push(
      `  ${plural(c.size, 'rank')} [${c.ranks}]: ${c.shape.slice(0, 3).join('; ')}${c.shape.length > 3 ? '; ...' : ''}`,
    );
  }
  if (e.classTotal > 5) out.push(`  ... ${e.classTotal - 5} more shapes`);
  if (e.outliers) out.push(`outliers: ${e.outliers}`);
  for (const p of e.progress) {
    const k = p.counts;
    out.push(
      `progress ${p.from} -> ${p.to}: ${p.verdict} (unchanged ${k.unchanged}, changed ${k.changed}, appeared ${k.appeared}, disappeared ${k.disappeared})`,
    );
  }
  return out.join('\n');
}
