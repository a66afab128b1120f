// The `mqd` command: one entry, one subcommand per job. Each command's module is imported only
// when that command runs, so `mqd --help` and `mqd agent` load no code they do not use.
import {
  AGENT_USAGE,
  CAPTURE_USAGE,
  type Io,
  RANKS_USAGE,
  RUN_USAGE,
  SERVE_USAGE_HEAD,
  SNAPSHOT_USAGE,
  USAGE,
} from './usage.js';

export { USAGE };

const io: Io = {
  out: (s: string) => process.stdout.write(`${s}\n`),
  err: (s: string) => process.stderr.write(`${s}\n`),
};

/**
 * The snapshot command's module: the one-file bundle the build makes beside this file
 * (bundle.ts; a cold `mqd snapshot` then loads one file instead of ~330), else the module itself
 * (running from the sources).
 */
async function snapshotModule(): Promise<typeof import('./snapshot-cmd.js')> {
  const { existsSync } = await import('node:fs');
  const bundle = new URL('./snapshot-cmd.bundle.js', import.meta.url);
  if (existsSync(bundle)) return (await import(bundle.href)) as typeof import('./snapshot-cmd.js');
  return import('./snapshot-cmd.js');
}

/** Starts the reader `mqd snapshot argv` will need, if its first target says whose it is. */
async function startSnapshotReader(argv: readonly string[]): Promise<void> {
  const { firstTargetPid } = await import('./early-reader.js');
  const pid = firstTargetPid(argv);
  if (pid === null) return;
  const { readerIdentityOfPid, startReaderEarly } = await import('@mqd/core/reader-spawn');
  const id = readerIdentityOfPid(pid);
  if (id) startReaderEarly(id);
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'snapshot':
      // Its reader starts now, and boots while this process loads the command (early-reader.ts);
      // MQD_EARLY_READER=0 starts it only when the command asks (benchmarks compare both).
      if (process.env['MQD_EARLY_READER'] !== '0') await startSnapshotReader(rest);
      return (await snapshotModule()).snapshotCommand(rest, io);
    case 'ranks':
      return (await import('./ranks-cmd.js')).ranksCommand(rest, io);
    case 'capture':
      return (await import('./capture-cmd.js')).captureCommand(rest, io);
    case 'run':
      return (await import('./run-cmd.js')).runCommand(rest, io);
    case 'serve':
      return (await import('./serve-cmd.js')).serveCommand(rest, io);
    case 'agent':
      return (await import('./agent-cmd.js')).agentCommand(rest, io);
    case 'agent-token':
      return (await import('./serve-cmd.js')).agentTokenCommand(rest, io);
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      io.out(
        [USAGE, SNAPSHOT_USAGE, CAPTURE_USAGE, RANKS_USAGE, RUN_USAGE, SERVE_USAGE_HEAD, AGENT_USAGE].join(
          '\n\n',
        ),
      );
      return cmd === undefined ? 2 : 0;
    default: {
      const { mqdError } = await import('@mqd/model');
      io.err(`${mqdError('MQD_E_USAGE', `unknown command '${cmd}'`).message}\n${USAGE}`);
      return 2;
    }
  }
}
