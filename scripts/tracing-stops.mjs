#!/usr/bin/env node
// The suite's closing check: no process on the machine is left in a tracing stop (State `t`) or
// traced by a tracer that a test left behind. "A rank is never left stopped" is a promise of
// the product; a test that breaks it (or a product bug it does not assert) shows up here.
//
// Only the run's own processes count: a thread is a leftover when it is in a tracing stop or
// has a tracer, and it or its tracer started after the run did (their start times, field 22 of
// /proc/PID/stat, against the run's). Something of another user's gdb session that started
// earlier is never named. A stop that is merely in progress (another suite on the same machine
// holding a rank for a read) ends within seconds: a thread counts only if it is still held
// after SETTLE_MS.
//
// Used two ways:
// - vitest's globalSetup of the unit and mpi projects (scripts/tracing-stops-teardown.mjs): the
//   run fails at its end, naming the pids;
// - scripts/test.sh's last step: `node scripts/tracing-stops.mjs --since TICKS --report FILE`
//   writes a report in vitest's JSON shape that scripts/summarize-tests.mjs counts.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** How long a held thread must stay held to count (a read in progress ends well before). */
export const SETTLE_MS = 5000;
const CHECK_NAME = 'no process is left in a tracing stop or traced by a leftover tracer';

function read(path) {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null; // gone, or not readable: nothing to say about it
  }
}

/** Field 22 of /proc/PID/stat: clock ticks after boot (null when gone). */
export function startTicks(pid) {
  const text = read(`/proc/${pid}/stat`);
  if (text === null) return null;
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const v = Number(rest[22 - 3]);
  return Number.isFinite(v) ? v : null;
}

function commandOf(pid) {
  const cmd = read(`/proc/${pid}/cmdline`);
  const text = cmd ? cmd.split('\0').filter(Boolean).join(' ') : (read(`/proc/${pid}/comm`) ?? '?').trim();
  return text.length > 160 ? `${text.slice(0, 159)}…` : text;
}

/** Every thread on the machine that is in a tracing stop or traced, with its tracer. */
function heldThreads() {
  const held = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    let tasks;
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const t of tasks) {
      const status = read(`/proc/${p}/task/${t}/status`);
      if (status === null) continue;
      const state = /^State:\s+(\S)/m.exec(status)?.[1] ?? '?';
      const tracer = Number(/^TracerPid:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      // A zombie has nothing left to run: only a stop, or a live thread with a tracer, counts.
      if (state === 't' || (tracer !== 0 && state !== 'Z' && state !== 'X'))
        held.push({ pid: Number(p), tid: Number(t), state, tracer });
    }
  }
  return held;
}

/** The held threads of processes that started at or after `since` (or whose tracer did). */
function leftoversNow(since) {
  const ours = (pid) => {
    const s = startTicks(pid);
    return s !== null && s >= since;
  };
  return heldThreads().filter((h) => ours(h.pid) || (h.tracer !== 0 && ours(h.tracer)));
}

const key = (h) => `${h.pid}/${h.tid}/${h.tracer}`;

/**
 * The run's threads still held after SETTLE_MS (each: pid, tid, state, tracer, their commands).
 * Returns at once when nothing is held.
 */
export async function findLeftovers(since, settleMs = SETTLE_MS) {
  let left = leftoversNow(since);
  const until = Date.now() + settleMs;
  while (left.length > 0 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 200));
    const now = new Set(leftoversNow(since).map(key));
    left = left.filter((h) => now.has(key(h)));
  }
  return left.map((h) => ({
    ...h,
    command: commandOf(h.pid),
    tracerCommand: h.tracer !== 0 ? commandOf(h.tracer) : null,
  }));
}

/** One line per leftover, for a failure message. */
export function describeLeftovers(left) {
  return left
    .map(
      (h) =>
        `pid ${h.pid} thread ${h.tid} state ${h.state}${h.tracer !== 0 ? ` traced by pid ${h.tracer} (${h.tracerCommand})` : ' (no tracer)'}: ${h.command}`,
    )
    .join('\n');
}

async function main(argv) {
  const arg = (name) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const since = Number(arg('--since'));
  if (!Number.isFinite(since)) {
    console.error(
      'usage: tracing-stops.mjs --since TICKS [--report FILE] [--settle MS]  (TICKS: field 22 of /proc/PID/stat)',
    );
    process.exit(2);
  }
  const settle = arg('--settle');
  const left = await findLeftovers(since, settle !== undefined ? Number(settle) : SETTLE_MS);
  const text = describeLeftovers(left);
  if (left.length > 0) console.log(`tracing stops left by the run:\n${text}`);
  else console.log('no process is left in a tracing stop or traced by the run');
  const report = arg('--report');
  if (report !== undefined) {
    const status = left.length > 0 ? 'failed' : 'passed';
    writeFileSync(
      report,
      JSON.stringify({
        testResults: [
          {
            name: 'scripts/tracing-stops.mjs',
            status,
            message: text,
            assertionResults: [
              { status, fullName: CHECK_NAME, failureMessages: left.length > 0 ? [text] : [] },
            ],
          },
        ],
      }),
    );
  }
  process.exit(left.length > 0 ? 1 : 0);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main(process.argv.slice(2));
