// The per-rank /proc counters the agent's `counters` request answers (the hang watch): CPU ticks
// and context switches of every thread and the main thread's state, read without stopping
// anything, each pid pinned by its start time and owner.
import { readdirSync, readFileSync } from 'node:fs';
import { checkTarget, parseProcStat, readProcStat } from '@mqd/core';
import { type MqdError, mqdError, type RankCounters } from '@mqd/model';

/** One rank whose counters are asked for: pid and start time pin the process. */
export interface CounterTarget {
  readonly rank: number;
  readonly pid: number;
  readonly startTime: string;
}

export interface RankCountersRead {
  readonly ranks: RankCounters[];
  readonly errors: { readonly rank: number; readonly error: MqdError }[];
}

function switchesOf(pid: number): number | null {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let sum = 0;
  for (const tid of tids) {
    let status: string;
    try {
      status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
    } catch {
      continue; // a thread that ended meanwhile: its switches went with it
    }
    sum += Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)?.[1] ?? 0);
    sum += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)$/m.exec(status)?.[1] ?? 0);
  }
  return sum;
}

function readOne(t: CounterTarget, ownerUid: number): RankCounters | MqdError {
  // The rules of a snapshot (start time, owner), except that a uid-0 job's own counters are
  // read for it: nothing is stopped and no memory is read.
  const refused = checkTarget(t.pid, { ownerUid, allowRoot: ownerUid === 0, startTime: t.startTime });
  if (refused !== null) return refused;
  let text: string;
  try {
    text = readFileSync(`/proc/${t.pid}/stat`, 'utf8');
  } catch {
    return mqdError('MQD_E_PID_EXITED', `pid ${t.pid} (rank ${t.rank}) exited while its counters were read`);
  }
  const s = parseProcStat(text);
  if (s === null || !Number.isSafeInteger(s.cpuTicks))
    return mqdError('MQD_E_INTERNAL', `/proc/${t.pid}/stat could not be parsed`);
  if (s.startTime !== t.startTime) {
    return mqdError(
      'MQD_E_PID_REUSED',
      `pid ${t.pid} started at tick ${s.startTime}, rank ${t.rank} at tick ${t.startTime}`,
    );
  }
  const switches = switchesOf(t.pid);
  // Read again last: a pid reused during the read must not pass for the rank.
  if (switches === null || readProcStat(t.pid)?.startTime !== t.startTime) {
    return mqdError('MQD_E_PID_EXITED', `pid ${t.pid} (rank ${t.rank}) exited while its counters were read`);
  }
  return { rank: t.rank, cpuTicks: s.cpuTicks, switches, state: s.state };
}

/**
 * The /proc counters of ranks (RankCounters: CPU ticks and context switches of every thread,
 * the main thread's state), read without stopping them. Each pid must still have its start
 * time and belong to `ownerUid`; one that does not is an error for that rank alone.
 */
export function rankCounters(targets: readonly CounterTarget[], ownerUid: number): RankCountersRead {
  const ranks: RankCounters[] = [];
  const errors: { rank: number; error: MqdError }[] = [];
  for (const t of targets) {
    const r = readOne(t, ownerUid);
    if ('code' in r) errors.push({ rank: t.rank, error: r });
    else ranks.push(r);
  }
  return { ranks, errors };
}
