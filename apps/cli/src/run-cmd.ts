// `mqd run [--snapshot] [--json] [--timeout SECONDS] -- STARTER [ARGS...]`

import { constants } from 'node:os';
import { formatSnapshot, type SnapshotResult, Snapshotter } from '@mqd/core';
import { type JobRanks, launchUnderTool, localHost, localTargets } from '@mqd/mpir';
import { commandArgs, usageError } from './command-args.js';
import { formatJobRanks } from './ranks-cmd.js';
import { type Io, RUN_USAGE } from './usage.js';

const usage = (io: Io, detail: string): number => usageError(io, RUN_USAGE, detail);

export async function runCommand(argv: string[], io: Io): Promise<number> {
  const dash = argv.indexOf('--');
  const own = dash >= 0 ? argv.slice(0, dash) : argv;
  const command = dash >= 0 ? argv.slice(dash + 1) : [];
  const values = commandArgs(io, RUN_USAGE, own, {
    snapshot: { type: 'boolean' },
    json: { type: 'boolean' },
    timeout: { type: 'string' },
  });
  if (typeof values === 'number') return values;
  if (command.length === 0) return usage(io, 'give the starter command after --');
  let timeoutMs = 60_000;
  if (values.timeout !== undefined) {
    const s = Number(values.timeout);
    if (!Number.isFinite(s) || s <= 0) return usage(io, `--timeout takes seconds, got '${values.timeout}'`);
    timeoutMs = Math.round(s * 1000);
  }

  const snapshotter = values.snapshot ? new Snapshotter() : null;
  const here = localHost();
  const report = (job: JobRanks, snap: SnapshotResult | null): void => {
    if (values.json) {
      io.out(JSON.stringify({ job, snapshot: snap?.snapshot ?? null }, null, 2));
      return;
    }
    io.out(formatJobRanks(job));
    if (snap) io.out(formatSnapshot(snap.snapshot, { all: false }));
  };
  try {
    const launched = await launchUnderTool(command, {
      stdio: 'inherit',
      timeoutMs,
      here,
      // Printed while the starter is held, so the table comes before the job's own output.
      atBreakpoint: async (job) => {
        const snap = snapshotter
          ? await snapshotter.snapshot(
              localTargets(job, here.short).map((r) => ({ pid: r.pid, rank: r.rank, host: r.host })),
            )
          : null;
        report(job, snap);
        return snap;
      },
    });
    if (!launched.ok) {
      io.err(launched.error.message);
      return 1;
    }
    // The job runs on for as long as it likes: do not keep a DLL host around for it.
    await snapshotter?.dispose();
    const job = launched.value;
    const forward = (sig: NodeJS.Signals) => job.signal(sig);
    process.on('SIGTERM', forward);
    process.on('SIGHUP', forward);
    // ^C goes to the whole foreground process group, the starter included: do not die first.
    const ignoreInt = () => {};
    process.on('SIGINT', ignoreInt);
    try {
      const exit = await job.wait();
      if (exit.signal !== null) return 128 + (constants.signals[exit.signal] ?? 0);
      return exit.code ?? 1;
    } finally {
      process.removeListener('SIGTERM', forward);
      process.removeListener('SIGHUP', forward);
      process.removeListener('SIGINT', ignoreInt);
    }
  } finally {
    await snapshotter?.dispose();
  }
}
