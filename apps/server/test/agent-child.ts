// A per-node agent in a process of its own, for tests that freeze it (SIGSTOP) or watch it from
// outside. argv: URL TOKEN HOST READ_MS. Prints CONNECTED once welcomed, and READING when a read
// starts; each read takes READ_MS milliseconds (or ends when the request is abandoned).
import { syntheticRingRank } from '@mqd/model';
import { startAgent } from '../src/agent/agent.js';

const [url, token, host, readMs] = process.argv.slice(2);
if (url === undefined || token === undefined || host === undefined || readMs === undefined)
  throw new Error('usage: agent-child URL TOKEN HOST READ_MS');
const agent = startAgent({
  serverUrl: url,
  token,
  host,
  reader: {
    mpi: null,
    read(ranks, o) {
      process.stdout.write('READING\n');
      return new Promise((resolve) => {
        const done = setTimeout(
          () => resolve(ranks.map((r) => syntheticRingRank(r.rank, r.pid, o.host, 2, 1, 0))),
          Number(readMs),
        );
        o.signal.addEventListener('abort', () => {
          clearTimeout(done);
          resolve([]);
        });
      });
    },
  },
});
await agent.whenConnected();
process.stdout.write('CONNECTED\n');
