// The seal on the messages between instances (cluster/seal.ts) and its secret (config.ts): what
// opens and what is refused, by why; the replay cache stays bounded without letting an evicted
// nonce through; the secret file's rules; a cluster whose agents hold the agent secret must have
// a file of its own. The channel attacked through a real PostgreSQL: cluster-attack.test.ts.
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MqdException } from '@mqd/model';
import { afterEach, describe, expect, it } from 'vitest';
import { derivedClusterSecret, pack, SEAL_WINDOW_MS, Sealer, unpack } from '../src/cluster/seal.js';
import { buildApp } from '../src/http/app.js';
import { clusterSecretOf, loadConfig } from '../src/http/config.js';
import { hostAgentToken } from '../src/hub/hub.js';
import { dropSecretsFromEnv } from '../src/shared/secrets.js';

const SECRET = 'cluster-seal-secret-0123456789abcdefgh';
const CH = 'mqd-sealed#/cluster';

describe('the seal', () => {
  it('opens what it sealed: JSON, byte arrays as Buffers, strings that look like placeholders', () => {
    const a = new Sealer(SECRET, 'host-a:1');
    const b = new Sealer(SECRET, 'host-b:2');
    const body = {
      text: Buffer.from('{"rank":0}'),
      u8: new Uint8Array([1, 2, 3]),
      nested: [{ deflated: Buffer.alloc(3, 9) }, '\u0000b0', '\u0000\u0000x', 'plain'],
      n: 42,
    };
    const opened = b.open(CH, a.seal(CH, body));
    if (!opened.ok) throw new Error(opened.why);
    expect(opened.value.sender).toBe('host-a:1');
    const got = opened.value.body as typeof body;
    expect(Buffer.isBuffer(got.text) && got.text.toString()).toBe('{"rank":0}');
    expect([...(got.u8 as Uint8Array)]).toEqual([1, 2, 3]);
    expect(got.nested[0]).toEqual({ deflated: Buffer.alloc(3, 9) });
    // A string of the message never passes for a byte array.
    expect(got.nested.slice(1)).toEqual(['\u0000b0', '\u0000\u0000x', 'plain']);
    expect(got.n).toBe(42);
  });

  it('costs a few dozen bytes over its body: deflated chunks are not base64-bloated', () => {
    const chunk = Buffer.alloc(100_000, 3);
    const sealed = new Sealer(SECRET, 'a').seal(CH, { id: 'x', deflated: chunk });
    expect(sealed.length).toBeLessThan(chunk.length + 200);
    expect(unpack(Buffer.concat(pack({ x: chunk })))).toEqual({ x: chunk });
  });

  it('refuses another key, another channel, a changed byte, and what is not sealed', () => {
    const sealed = new Sealer(SECRET, 'a').seal(CH, { secret: 'victim-node' });
    const b = new Sealer(SECRET, 'b');
    expect(new Sealer(`${SECRET}-other`, 'c').open(CH, sealed)).toEqual({ ok: false, why: 'forged' });
    expect(b.open('mqd-sealed#/ui', sealed)).toEqual({ ok: false, why: 'forged' });
    const changed = Buffer.from(sealed);
    changed[40] = (changed[40] ?? 0) ^ 1;
    expect(b.open(CH, changed)).toEqual({ ok: false, why: 'forged' });
    expect(b.open(CH, Buffer.from('{"uid":"x","type":9}'))).toEqual({ ok: false, why: 'unsealed' });
    expect(sealed.toString('latin1')).not.toContain('victim-node');
    // Untouched, it opens (the refusals above were not of a bad message).
    expect(b.open(CH, sealed).ok).toBe(true);
  });

  it('refuses a message sealed outside the time window, and one it has opened before', () => {
    let now = 1_000_000_000;
    const b = new Sealer(SECRET, 'b', () => now);
    const late = new Sealer(SECRET, 'a', () => now - SEAL_WINDOW_MS - 1).seal(CH, {});
    const early = new Sealer(SECRET, 'a', () => now + SEAL_WINDOW_MS + 1).seal(CH, {});
    expect(b.open(CH, late)).toEqual({ ok: false, why: 'stale' });
    expect(b.open(CH, early)).toEqual({ ok: false, why: 'stale' });
    const fresh = new Sealer(SECRET, 'a', () => now).seal(CH, {});
    expect(b.open(CH, fresh).ok).toBe(true);
    expect(b.open(CH, fresh)).toEqual({ ok: false, why: 'replayed' });
    now += SEAL_WINDOW_MS + 1;
    expect(b.open(CH, fresh)).toEqual({ ok: false, why: 'stale' });
  });

  it('remembers a bounded number of nonces; one it forgot is refused all the same', () => {
    let now = 5_000_000;
    const a = new Sealer(SECRET, 'a', () => now);
    const b = new Sealer(SECRET, 'b', () => now, 3);
    const sent = [0, 1, 2, 3, 4].map(() => {
      now += 1;
      return a.seal(CH, {});
    });
    for (const m of sent) expect(b.open(CH, m).ok).toBe(true);
    expect(b.remembered).toBeLessThanOrEqual(3);
    // The first two were forgotten to stay in bound: everything sealed up to them is refused.
    expect(b.open(CH, sent[0] as Buffer).ok).toBe(false);
    expect(b.open(CH, sent[1] as Buffer).ok).toBe(false);
    expect(b.open(CH, sent[4] as Buffer)).toEqual({ ok: false, why: 'replayed' });
    now += 1;
    expect(b.open(CH, a.seal(CH, {})).ok).toBe(true);
  });
});

describe('the cluster secret', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const secretFile = (text: string, mode: number): string => {
    const d = mkdtempSync(join(tmpdir(), 'mqd-cluster-secret-'));
    dirs.push(d);
    const f = join(d, 'cluster.secret');
    writeFileSync(f, text, { mode });
    return f;
  };
  const PG = 'postgres://mqd@db.invalid/mqd';
  const code = (r: ReturnType<typeof loadConfig>) => (r.ok ? 'ok' : r.error.code);

  it('reads the file; refuses one group or others may read, a short one, and (as root) another uid’s', () => {
    const good = secretFile(`${SECRET}\n`, 0o600);
    const r = loadConfig({ argv: ['--cluster-secret-file', good] });
    expect(r.ok && r.value.clusterSecret).toBe(SECRET);
    const open = secretFile(SECRET, 0o644);
    const refused = loadConfig({ env: { MQD_CLUSTER_SECRET_FILE: open } });
    expect(code(refused)).toBe('MQD_E_CLUSTER_SECRET');
    expect(refused.ok ? '' : refused.error.message).toContain(`chmod 600 ${open}`);
    expect(code(loadConfig({ argv: ['--cluster-secret-file', secretFile('short-0123456789', 0o600)] }))).toBe(
      'MQD_E_CLUSTER_SECRET',
    );
    if (process.getuid?.() === 0) {
      const theirs = secretFile(SECRET, 0o600);
      chownSync(theirs, 65534, 65534);
      const r2 = loadConfig({ argv: ['--cluster-secret-file', theirs] });
      expect(code(r2)).toBe('MQD_E_CLUSTER_SECRET');
      expect(r2.ok ? '' : r2.error.message).toContain('uid 65534');
    }
  });

  it('is a file of its own when the agents hold the agent secret (the shared token on PostgreSQL)', () => {
    const agent = ['--agent-token', 'agent-secret-0123456789abcdef', '--store', PG];
    expect(code(loadConfig({ argv: [...agent, '--allow-shared-agent-token'] }))).toBe('MQD_E_CLUSTER_SECRET');
    const file = secretFile(SECRET, 0o600);
    expect(
      code(loadConfig({ argv: [...agent, '--allow-shared-agent-token', '--cluster-secret-file', file] })),
    ).toBe('ok');
    // Per-host tokens only: derived, and nothing an agent holds.
    const derived = clusterSecretOf(
      { storeUrl: PG, allowSharedAgentToken: false, clusterSecret: null },
      'agent-secret-0123456789abcdef',
    );
    expect(derived).toEqual({ ok: true, value: derivedClusterSecret('agent-secret-0123456789abcdef') });
    expect(derived.ok && derived.value).not.toBe('agent-secret-0123456789abcdef');
    expect(derived.ok && derived.value).not.toBe(hostAgentToken('agent-secret-0123456789abcdef', 'node-1'));
    // SQLite: one instance, no channel; the shared token needs no file there.
    expect(
      code(
        loadConfig({
          argv: ['--agent-token', 'agent-secret-0123456789abcdef', '--allow-shared-agent-token'],
        }),
      ),
    ).toBe('ok');
  });

  it('buildApp refuses the shared agent token on PostgreSQL without the file, before opening the store', async () => {
    const built = buildApp({
      logger: false,
      config: { storeUrl: PG, agentToken: 'agent-secret-0123456789abcdef', allowSharedAgentToken: true },
    });
    await expect(built).rejects.toBeInstanceOf(MqdException);
    await expect(built).rejects.toMatchObject({ error: { code: 'MQD_E_CLUSTER_SECRET' } });
  });

  it('leaves the environment with the file’s variable', () => {
    const env: NodeJS.ProcessEnv = { MQD_CLUSTER_SECRET_FILE: '/etc/mqd/cluster.secret', MQD_PORT: '1' };
    expect(dropSecretsFromEnv(env)).toEqual(['MQD_CLUSTER_SECRET_FILE']);
    expect(env).toEqual({ MQD_PORT: '1' });
  });
});
