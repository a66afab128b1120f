// `mqd serve` with its in-process agent, from the sources, in a child process of a test: a test
// that may block the server's event loop (a FIFO the agent opens) watches it from outside.
// argv: ADMIN_TOKEN CORE_DIR. Prints `URL <url>` once the agent is connected; runs until killed.
import { loadConfig } from '@mqd/server';
import { serveWithLocalAgent } from '../src/local-serve.js';

const [adminToken, coreDir] = process.argv.slice(2);
if (adminToken === undefined || coreDir === undefined)
  throw new Error('usage: serve-child ADMIN_TOKEN CORE_DIR');
const cfg = loadConfig({
  env: {},
  argv: ['--core-dir', coreDir],
  overrides: { port: 0, host: '127.0.0.1', dataDir: ':memory:', adminToken },
});
if (!cfg.ok) throw new Error(cfg.error.message);
const local = await serveWithLocalAgent(cfg.value);
process.stdout.write(`URL ${local.served.url}\n`);
