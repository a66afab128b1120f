// Root's credentials never reach a user's code. `mqd serve` as root with
// MQD_ADMIN_TOKEN, MQD_AGENT_TOKEN and MQD_METRICS_TOKEN in its environment (as its --help used
// to offer): a user (uid 65534 via setpriv) runs a process that looks like a rank and names their
// own library, whose constructor writes the environment it was given to a file of theirs, and
// takes a snapshot through the API. None of the three may be in that file; the server still
// knows them (admin and metrics tokens work). Credentials also come from mode-600 files, and are
// dropped from the environment of `mqd serve` and `mqd agent` once read.
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Attacker, buildAttacker, NOBODY, type Started, startProcess } from '@mqd/core/testing';
import { configHelp, dropSecretsFromEnv, loadConfig } from '@mqd/server';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { agentCommand } from '../src/agent-cmd.js';
import { servedUrl } from './run-mqd.js';

const SECRETS = {
  MQD_ADMIN_TOKEN: 'admin-secret-0123456789abcdef-serve',
  MQD_AGENT_TOKEN: 'agent-secret-0123456789abcdef-serve',
  MQD_METRICS_TOKEN: 'metrics-secret-0123456789abcdef-serve',
};
const SECRET_NAME = /^MQD_\w*(TOKEN|SECRET)/;
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function secretFile(content: string, mode: number): string {
  const d = mkdtempSync(join(tmpdir(), 'mqd-secret-'));
  dirs.push(d);
  const p = join(d, 'token');
  writeFileSync(p, `${content}\n`);
  chmodSync(p, mode);
  return p;
}

describe('credentials from files, dropped from the environment once read', () => {
  it('mqd serve reads --admin-token-file / MQD_METRICS_TOKEN_FILE, refuses an open file without quoting it', () => {
    const admin = secretFile('admin-from-file-0123456789', 0o600);
    const metrics = secretFile('metrics-from-file-0123456789', 0o600);
    const cfg = loadConfig({ env: { MQD_METRICS_TOKEN_FILE: metrics }, argv: ['--admin-token-file', admin] });
    expect(cfg.ok && { a: cfg.value.adminToken, m: cfg.value.metricsToken }).toEqual({
      a: 'admin-from-file-0123456789',
      m: 'metrics-from-file-0123456789',
    });
    const open = secretFile('world-readable-0123456789', 0o644);
    const bad = loadConfig({ argv: ['--agent-token-file', open] });
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      expect(bad.error.code).toBe('MQD_E_USAGE');
      expect(bad.error.message).toMatch(/chmod 600/);
      expect(bad.error.message).not.toContain('world-readable');
    }
    // The secret itself and its file: which one is meant is not guessed.
    const both = loadConfig({
      env: { MQD_ADMIN_TOKEN: SECRETS.MQD_ADMIN_TOKEN },
      argv: ['--admin-token-file', admin],
    });
    expect(both.ok ? 'ok' : both.error.code).toBe('MQD_E_USAGE');
    // --help shows each file before the secret itself.
    const help = configHelp();
    for (const t of ['admin', 'agent', 'metrics'])
      expect(help.indexOf(`--${t}-token-file`)).toBeLessThan(help.indexOf(`--${t}-token `));
  });

  it('dropSecretsFromEnv removes every MQD_*TOKEN*/SECRET* variable, the webhook URLs and the store URL, nothing else', () => {
    const env: NodeJS.ProcessEnv = {
      ...SECRETS,
      MQD_AGENT_SECRET: 'x',
      MQD_ADMIN_TOKEN_FILE: '/f',
      MQD_WATCH_WEBHOOKS: 'https://hooks.example/T000/B000/secret',
      MQD_STORE_URL: 'postgres://mqd:secret@db.example/mqd',
      MQD_WATCH_ENABLED: 'on',
      MQD_PORT: '1',
      PATH: '/bin',
    };
    expect(dropSecretsFromEnv(env).sort()).toEqual(
      [
        'MQD_ADMIN_TOKEN',
        'MQD_ADMIN_TOKEN_FILE',
        'MQD_AGENT_SECRET',
        'MQD_AGENT_TOKEN',
        'MQD_METRICS_TOKEN',
        'MQD_WATCH_WEBHOOKS',
        'MQD_STORE_URL',
      ].sort(),
    );
    expect(env).toEqual({ MQD_WATCH_ENABLED: 'on', MQD_PORT: '1', PATH: '/bin' });
  });

  it('mqd agent given its token by MQD_AGENT_TOKEN: the variable is gone once it is read', async () => {
    process.env['MQD_AGENT_TOKEN'] = SECRETS.MQD_AGENT_TOKEN;
    const out: string[] = [];
    let stop = (): void => undefined;
    const stopped = new Promise<void>((r) => {
      stop = r;
    });
    const run = agentCommand(
      ['--server', 'http://127.0.0.1:9', '--host', 'envtest'],
      {
        out: (s) => {
          out.push(s);
          stop(); // it is running with its token: stop it again
        },
        err: () => undefined,
      },
      { untilStopped: stopped },
    );
    expect(await run).toBe(0);
    expect(out.join('\n')).toMatch(/connecting to http:\/\/127\.0\.0\.1:9/);
    expect(process.env['MQD_AGENT_TOKEN']).toBeUndefined();
  });
});

describe('mqd serve as root with the three tokens in its environment, attacked by uid 65534', () => {
  let a: Attacker | null = null;
  let server: ChildProcess | null = null;
  const started: Started[] = [];
  afterAll(() => {
    for (const s of started) s.kill();
    server?.kill('SIGKILL');
    a?.dispose();
  });

  async function startServe(): Promise<string> {
    // The CLI from its sources (no build needed), as root, secrets in its environment.
    const script = `const { main } = await import(${JSON.stringify(MAIN)}); process.exitCode = await main(process.argv.slice(1));`;
    const child = spawn(
      process.execPath,
      [
        '--conditions=source',
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        script,
        'serve',
        '--port',
        '0',
        '--data-dir',
        ':memory:',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...SECRETS } },
    );
    server = child;
    return servedUrl(child);
  }

  it("the user's library, loaded by the snapshot's reader, finds none of them; the server still uses them", async () => {
    expect(process.getuid?.()).toBe(0);
    a = buildAttacker();
    const url = await startServe();
    const admin = { authorization: `Bearer ${SECRETS.MQD_ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const created = await fetch(`${url}/api/admin/users`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ name: 'mallory', uid: NOBODY }),
    });
    expect(created.status).toBe(201); // the admin token from the environment was read
    const { token } = (await created.json()) as { token: string };
    const metrics = await fetch(`${url}/metrics`, {
      headers: { authorization: `Bearer ${SECRETS.MQD_METRICS_TOKEN}` },
    });
    expect(metrics.status).toBe(200);

    const rank = await startProcess([a.rank, a.evilEnv], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    started.push(rank);
    const starter = await startProcess([a.starter, String(rank.pid)]);
    started.push(starter);
    const user = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const attach = await fetch(`${url}/api/jobs/attach`, {
      method: 'POST',
      headers: user,
      body: JSON.stringify({ starterPid: starter.pid }),
    });
    expect(attach.status).toBe(201);
    const { job } = (await attach.json()) as { job: { id: string } };
    const snap = await fetch(`${url}/api/jobs/${job.id}/snapshots`, {
      method: 'POST',
      headers: { authorization: user.authorization },
    });
    expect(snap.status).toBeLessThan(500);

    // The reader (uid 65534) loaded the user's library, which wrote what it was given.
    expect(readFileSync(a.out, 'utf8').trim().split('\n')).toContain(`euid=${NOBODY} uid=${NOBODY}`);
    expect(existsSync(a.envOut)).toBe(true);
    const environ = readFileSync(a.envOut, 'utf8').split('\n').filter(Boolean);
    expect(environ.some((l) => l.startsWith('MQD_READER_UID='))).toBe(true);
    expect(environ.filter((l) => SECRET_NAME.test(l))).toEqual([]);
    for (const secret of Object.values(SECRETS)) expect(environ.join('\n')).not.toContain(secret);
  });
});
