// Core directories against a real unprivileged user: uid 65534 (setpriv) runs its own HTTP
// client against an aggregator run as root, with a world-writable allowed root (like
// /var/crash). It may open its own cores; a directory outside the root, root's cores, a
// symlink it planted towards root's cores or out of the root are each refused with their code,
// and the attempt leaves no job behind.
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent/agent.js';
import { createFakeReader, FAKE_CORE_MAGIC, withFakeCores } from '../src/synthetic/fakes.js';
import { AGENT_TOKEN, cleanupAfterEach, createUser, startServer } from './helpers.js';

const NOBODY = 65534;
const cleanup = cleanupAfterEach();

let base = '';
let allowed = '';
let secret = '';

beforeAll(() => {
  if (process.getuid?.() !== 0) throw new Error('cores-attack.test.ts needs root (setpriv, chown)');
  base = mkdtempSync('/tmp/mqd-cores-attack-');
  chmodSync(base, 0o755);
  allowed = join(base, 'crash');
  mkdirSync(allowed);
  chmodSync(allowed, 0o1777);
  // root's cores, inside the allowed root and outside it
  for (const d of [join(allowed, 'root-job'), join(base, 'secret')]) {
    mkdirSync(d);
    writeFileSync(join(d, 'rank-0.core'), `${FAKE_CORE_MAGIC}root's memory`);
    chmodSync(join(d, 'rank-0.core'), 0o644);
    chownSync(join(d, 'rank-0.core'), 0, 0);
  }
  secret = join(base, 'secret');
});
afterAll(() => {
  if (base !== '') rmSync(base, { recursive: true, force: true });
});

/** The attacker's script: lays out its files as itself, then asks the aggregator for each directory. */
const CLIENT = `
import { mkdirSync, writeFileSync, symlinkSync } from 'node:fs';
const [url, token, allowed, secret] = process.argv.slice(2);
const mine = allowed + '/mine';
mkdirSync(mine);
writeFileSync(mine + '/rank-0.core', '\\x7fELF my own core');
mkdirSync(allowed + '/sneaky');
symlinkSync(allowed + '/root-job/rank-0.core', allowed + '/sneaky/rank-0.core');
symlinkSync(secret, allowed + '/escape');
const auth = { authorization: 'Bearer ' + token, 'content-type': 'application/json' };
const out = {};
for (const [name, coresDir] of [
  ['outside', secret],
  ['dotdot', allowed + '/../secret'],
  ['escape', allowed + '/escape'],
  ['root', allowed + '/root-job'],
  ['sneaky', allowed + '/sneaky'],
  ['mine', mine],
]) {
  const r = await fetch(url + '/api/jobs/attach', { method: 'POST', headers: auth, body: JSON.stringify({ coresDir }) });
  const b = await r.json();
  out[name] = { status: r.status, code: b.code ?? null, uid: b.job?.uid ?? null };
}
const jobs = await (await fetch(url + '/api/jobs', { headers: auth })).json();
out.jobs = jobs.jobs.map((j) => j.coresDir);
console.log(JSON.stringify(out));
`;

describe('core directories against uid 65534', () => {
  it('opens its own cores and refuses everything else with a code', async () => {
    const s = await startServer({ coreDirs: [allowed] });
    cleanup.push(() => s.close());
    const agent = startAgent({
      serverUrl: s.url,
      token: AGENT_TOKEN,
      host: 'node0',
      reader: createFakeReader({ worldSize: 1 }),
      locator: withFakeCores(null),
      coreDirs: [allowed],
    });
    cleanup.push(() => agent.dispose());
    await agent.whenConnected();
    const user = await createUser(s.app, 'nobody', NOBODY);
    const token = user.authorization.replace(/^Bearer /, '');

    const dir = mkdtempSync('/tmp/mqd-cores-attack-client-');
    cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'client.mjs');
    writeFileSync(file, CLIENT);
    chmodSync(dir, 0o755);
    chmodSync(file, 0o644);
    // The client's own process, as uid 65534: everything it creates is its own. Spawned and
    // awaited (not execFileSync): the server it talks to runs on this event loop.
    const out = await new Promise<string>((resolve, reject) => {
      const child = spawn(
        'setpriv',
        [
          `--reuid=${NOBODY}`,
          `--regid=${NOBODY}`,
          '--clear-groups',
          process.execPath,
          file,
          s.url,
          token,
          allowed,
          secret,
        ],
        {
          env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: '/tmp' },
          stdio: ['ignore', 'pipe', 'pipe'],
          timeout: 60_000,
        },
      );
      let text = '';
      child.stdout.on('data', (d: Buffer) => {
        text += d.toString();
      });
      child.stderr.on('data', (d: Buffer) => {
        text += d.toString();
      });
      child.on('exit', (code) =>
        code === 0 ? resolve(text) : reject(new Error(`client exited ${code}: ${text}`)),
      );
    });
    const r = JSON.parse(out.trim().split('\n').pop() ?? 'null') as Record<
      string,
      { status: number; code: string | null; uid: number | null }
    > & { jobs: string[] };
    expect(r['outside']).toEqual({ status: 403, code: 'MQD_E_CORE_DIR_FORBIDDEN', uid: null });
    expect(r['dotdot']).toEqual({ status: 400, code: 'MQD_E_BAD_INPUT', uid: null });
    expect(r['escape']).toEqual({ status: 403, code: 'MQD_E_CORE_DIR_FORBIDDEN', uid: null });
    expect(r['root']).toEqual({ status: 403, code: 'MQD_E_FORBIDDEN', uid: null });
    expect(r['sneaky']).toEqual({ status: 403, code: 'MQD_E_FORBIDDEN', uid: null });
    expect(r['mine']).toEqual({ status: 201, code: null, uid: NOBODY });
    expect(r.jobs).toEqual([join(allowed, 'mine')]);
    // Nothing refused was stored, even for the admin.
    const all = await s.app.inject({ url: '/api/jobs', headers: s.admin });
    expect((JSON.parse(all.body) as { jobs: { coresDir?: string }[] }).jobs.map((j) => j.coresDir)).toEqual([
      join(allowed, 'mine'),
    ]);
  });
});
