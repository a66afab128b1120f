// A core directory's manifest.json planted by a real unprivileged user (uid 65534 via setpriv),
// opened by root: a FIFO named manifest.json once blocked the server's event
// loop for as long as the user wanted; a link to a root-only file came back in the error text.
// The server (`mqd serve` with its in-process agent, run as root) runs in a child process, so a
// blocked event loop shows as a health check that does not answer instead of a hung test.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NOBODY } from '@mqd/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readManifest } from '../src/core-args.js';
import { snapshotCommand } from '../src/snapshot-cmd.js';

const ADMIN = 'manifest-attack-admin-token-0123456789abcdef';
const SECRET = `TOPSECRET-${randomBytes(12).toString('hex')}`;
const CHILD = fileURLToPath(new URL('./serve-child.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

let base = '';
let allowed = '';
let server: ChildProcess | null = null;
let url = '';

function asNobody(script: string): void {
  execFileSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'sh', '-c', script], {
    stdio: 'pipe',
  });
}

beforeAll(async () => {
  expect(process.getuid?.()).toBe(0); // root opens what the user planted
  base = mkdtempSync('/tmp/mqd-manifest-attack-');
  chmodSync(base, 0o755);
  writeFileSync(join(base, 'secret'), `${SECRET}\n`, { mode: 0o600 });
  allowed = join(base, 'crash');
  mkdirSync(allowed);
  chmodSync(allowed, 0o1777);
  // The attacker's directories: a FIFO as the manifest, a link to root's secret as the manifest,
  // and a manifest too big to be one.
  asNobody(
    [
      `mkdir ${allowed}/fifo && mkfifo ${allowed}/fifo/manifest.json && : > ${allowed}/fifo/rank-0.core`,
      `mkdir ${allowed}/link && ln -s ${base}/secret ${allowed}/link/manifest.json`,
      `mkdir ${allowed}/big && head -c 2000000 /dev/zero > ${allowed}/big/manifest.json`,
    ].join(' && '),
  );
  server = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', CHILD, ADMIN, allowed], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /^URL (\S+)$/m.exec(out);
      if (m?.[1]) resolve(m[1]);
    };
    server?.stdout?.on('data', onData);
    server?.stderr?.on('data', onData);
    server?.on('exit', (code) => reject(new Error(`the server exited (${code}) before listening: ${out}`)));
  });
}, 120_000);

afterAll(() => {
  server?.kill('SIGKILL');
  if (base !== '') rmSync(base, { recursive: true, force: true });
});

async function attach(coresDir: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${url}/api/jobs/attach`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ coresDir }),
    // A blocked server never answers: fail in seconds, not at the test's timeout.
    signal: AbortSignal.timeout(10_000),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

const health = async () => (await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(5_000) })).status;

describe("manifest.json planted by uid 65534, opened by root's agent", () => {
  it('a FIFO: MQD_E_CORE_MANIFEST at once, and the server keeps answering', async () => {
    const [refused, alive] = await Promise.all([attach(join(allowed, 'fifo')), health()]);
    expect(refused.status, JSON.stringify(refused.body)).toBe(422);
    expect(refused.body['code']).toBe('MQD_E_CORE_MANIFEST');
    expect(String(refused.body['message'])).toMatch(/manifest\.json: is a FIFO, not a regular file/);
    expect(alive).toBe(200);
    expect(await health()).toBe(200);
  });

  it("a link to a root-only file: MQD_E_CORE_MANIFEST, and the file's bytes appear in no error", async () => {
    const refused = await attach(join(allowed, 'link'));
    expect(refused.status).toBe(422);
    expect(refused.body['code']).toBe('MQD_E_CORE_MANIFEST');
    expect(String(refused.body['message'])).toMatch(/is a symbolic link/);
    expect(JSON.stringify(refused.body)).not.toContain('TOPSECRET');
    // The same directory through the CLI run as root (`mqd snapshot --cores DIR`).
    const err: string[] = [];
    const code = await snapshotCommand(['--cores', join(allowed, 'link')], {
      out: (s) => err.push(s),
      err: (s) => err.push(s),
    });
    expect(code).toBe(2);
    expect(err.join('\n')).toMatch(/^MQD_E_CORE_MANIFEST: .*manifest\.json: is a symbolic link/);
    expect(err.join('\n')).not.toContain('TOPSECRET');
  });

  it('a manifest over 1 MiB, or one whose JSON is broken: coded, without its bytes', async () => {
    const big = await attach(join(allowed, 'big'));
    expect(big.body['code']).toBe('MQD_E_CORE_MANIFEST');
    expect(String(big.body['message'])).toMatch(/is larger than 1048576 bytes/);
    // A regular file of root's with the secret (as a hard link or a copy would be): JSON.parse's
    // own message quotes the text it choked on; ours does not.
    const d = mkdtempSync(join(base, 'copy-'));
    writeFileSync(join(d, 'manifest.json'), `${SECRET}\n`);
    const bad = readManifest(join(d, 'manifest.json'));
    expect(bad).toMatchObject({ code: 'MQD_E_CORE_MANIFEST' });
    expect(JSON.stringify(bad)).toMatch(/is not valid JSON/);
    expect(JSON.stringify(bad)).not.toContain('TOPSECRET');
  });
});
