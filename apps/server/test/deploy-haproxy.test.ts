// The example haproxy configuration of docs/deploy/ (several `mqd serve` instances behind one
// address) is one haproxy accepts: `haproxy -c` on it, with a throwaway certificate
// in place of the site's. What the shape does with real instances (stickiness, a killed
// instance taken out of the rotation) is tested with the same shape in the cluster tests.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HAPROXY, haproxyAvailable, haproxyConfig } from '@mqd/testkit';
import { afterAll, describe, expect, it } from 'vitest';

const EXAMPLE = fileURLToPath(new URL('../../../docs/deploy/haproxy.cfg', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'mqd-haproxy-check-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function check(config: string): { status: number | null; out: string } {
  const file = join(dir, `check-${Math.random().toString(36).slice(2)}.cfg`);
  writeFileSync(file, config);
  const r = spawnSync(HAPROXY, ['-c', '-f', file], { encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe.runIf(haproxyAvailable())('docs/deploy/haproxy.cfg', () => {
  it('is accepted by haproxy -c (with a test certificate) and keeps the settings the cluster needs', () => {
    const key = join(dir, 'key.pem');
    const cert = join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert].concat([
        '-days',
        '1',
        '-subj',
        '/CN=mqd.example.org',
      ]),
      { stdio: 'ignore' },
    );
    const pem = join(dir, 'mqd.pem');
    writeFileSync(pem, readFileSync(cert, 'utf8') + readFileSync(key, 'utf8'));
    const text = readFileSync(EXAMPLE, 'utf8');
    expect(text).toContain('/etc/haproxy/mqd.pem');
    const r = check(text.replace('/etc/haproxy/mqd.pem', pem));
    expect(r.out).toContain('Configuration file is valid');
    expect(r.status).toBe(0);
    // Stickiness for socket.io's polling, a redispatch on a lost instance, long tunnels.
    for (const needed of ['cookie MQDSRV insert', 'option redispatch', 'timeout tunnel', ' check inter '])
      expect(text).toContain(needed);
  });

  it('a broken configuration is refused (the check can fail)', () => {
    const r = check('frontend x\n  bind 127.0.0.1:1\n  default_backend missing\n');
    expect(r.status).not.toBe(0);
  });

  it("the tests' own shape is valid too", () => {
    const r = check(
      haproxyConfig(1, [
        { name: 'a', port: 2 },
        { name: 'b', port: 3 },
      ]),
    );
    expect(r.out).toContain('Configuration file is valid');
  });
});
