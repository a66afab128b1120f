// What each command loads. `mqd --help` must load no command (no native module, no server),
// and `mqd agent` on a compute node must load no web server, socket.io server or database:
// those are the aggregator's, and every module loaded is start time and attack surface.
// Runs the built CLI (npm test builds before the unit project), in a child per case, and
// lists the CommonJS modules that child loaded (fastify, better-sqlite3, socket.io, koffi are
// all CommonJS, so they show in require.cache whichever way they were imported).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));

/** The CommonJS modules loaded after `run` (module code) executes in a fresh node. */
function loadedAfter(run: string): string[] {
  const script = `
    import { createRequire } from 'node:module';
    ${run}
    const req = createRequire(import.meta.url);
    process.stdout.write('\\n@@' + JSON.stringify(Object.keys(req.cache)));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: DIST,
    encoding: 'utf8',
  });
  const at = out.lastIndexOf('\n@@');
  return JSON.parse(out.slice(at + 3)) as string[];
}

const SERVER_SIDE = /node_modules\/(fastify|@fastify|better-sqlite3|socket\.io|engine\.io)\//;

describe('lazy commands', () => {
  it('mqd --help prints every command and loads no command module', () => {
    const mods = loadedAfter(`
      const { main } = await import(${JSON.stringify(`${DIST}main.js`)});
      const out = [];
      const write = process.stdout.write;
      process.stdout.write = (s) => out.push(String(s)) > 0;
      const code = await main(['--help']);
      process.stdout.write = write;
      if (code !== 0 || !out.join('').includes('usage: mqd agent')) throw new Error('bad help ' + code);
    `);
    expect(mods.filter((m) => /koffi|node_modules/.test(m))).toEqual([]);
  });

  it('mqd agent loads the agent and the MPI reader, not the aggregator', () => {
    const mods = loadedAfter(`await import(${JSON.stringify(`${DIST}agent-cmd.js`)});`);
    expect(mods.some((m) => /koffi/.test(m))).toBe(true); // the reader is there
    expect(mods.some((m) => m.includes('/xmlhttprequest-ssl/'))).toBe(true); // socket.io-client's transport
    expect(mods.filter((m) => SERVER_SIDE.test(m))).toEqual([]);
  });

  it('mqd serve does load the aggregator (the check above can see it)', () => {
    const mods = loadedAfter(`await import(${JSON.stringify(`${DIST}serve-cmd.js`)});`);
    expect(mods.some((m) => SERVER_SIDE.test(m))).toBe(true);
  });
});
