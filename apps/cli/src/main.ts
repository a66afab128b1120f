// The `mqd` command: one entry, one subcommand per job.
import { mqdError } from '@mqd/model';
import { RANKS_USAGE, ranksCommand } from './ranks-cmd.js';
import { RUN_USAGE, runCommand } from './run-cmd.js';
import { AGENT_USAGE, agentCommand, agentTokenCommand, SERVE_USAGE, serveCommand } from './serve-cmd.js';
import { SNAPSHOT_USAGE, snapshotCommand } from './snapshot-cmd.js';

export const USAGE = `usage: mqd <command> [options]
commands:
  snapshot   read the message queues of MPI processes (mqd snapshot --help)
  ranks      list the ranks of a job from its starter's pid (mqd ranks --help)
  run        launch a job under the tool: mqd run [--snapshot] -- mpirun -np 4 ./app
  serve      the dashboard: aggregator + a local agent, SQLite store (mqd serve --help)
  agent      connect this node to an aggregator (mqd agent --help)
  agent-token  print a node's own agent token (admins; mqd agent --help)
exit codes: 0 ok, 1 nothing could be read, 2 usage, 3 partial (some ranks failed)`;

const io = {
  out: (s: string) => process.stdout.write(`${s}\n`),
  err: (s: string) => process.stderr.write(`${s}\n`),
};

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'snapshot':
      return snapshotCommand(rest, io);
    case 'ranks':
      return ranksCommand(rest, io);
    case 'run':
      return runCommand(rest, io);
    case 'serve':
      return serveCommand(rest, io);
    case 'agent':
      return agentCommand(rest, io);
    case 'agent-token':
      return agentTokenCommand(rest, io);
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      io.out([USAGE, SNAPSHOT_USAGE, RANKS_USAGE, RUN_USAGE, SERVE_USAGE, AGENT_USAGE].join('\n\n'));
      return cmd === undefined ? 2 : 0;
    default:
      io.err(`${mqdError('MQD_E_USAGE', `unknown command '${cmd}'`).message}\n${USAGE}`);
      return 2;
  }
}
