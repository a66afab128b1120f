// The agent's credential never comes from argv unless the user insists (with a warning), and a
// token file that other users could read is refused.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostAgentToken } from '@mqd/server';
import { afterEach, describe, expect, it } from 'vitest';
import { agentCommand } from '../src/agent-cmd.js';
import { readSecretFile } from '../src/secret-file.js';
import { agentTokenCommand } from '../src/serve-cmd.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tokenFile(mode: number): string {
  const d = mkdtempSync(join(tmpdir(), 'mqd-cred-'));
  dirs.push(d);
  const p = join(d, 'token');
  writeFileSync(p, 'secret-token-0123456789\n');
  chmodSync(p, mode);
  return p;
}

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (s: string) => out.push(s), err: (s: string) => err.push(s) }, out, err };
}

describe('agent credentials', () => {
  it('reads a 0600 token file and refuses one readable by group or others', () => {
    expect(readSecretFile(tokenFile(0o600))).toEqual({ ok: true, value: 'secret-token-0123456789' });
    for (const mode of [0o640, 0o604, 0o660]) {
      const r = readSecretFile(tokenFile(mode));
      expect(r.ok, mode.toString(8)).toBe(false);
      if (!r.ok) expect(r.message).toMatch(/chmod 600/);
    }
  });

  it('checks the file it reads, once opened: a FIFO is refused at once, a link is judged by its target', () => {
    const d = mkdtempSync(join(tmpdir(), 'mqd-cred-'));
    dirs.push(d);
    const fifo = join(d, 'fifo');
    execFileSync('mkfifo', ['-m', '600', fifo]);
    // No writer ever comes: reading it by path would block this process for good.
    expect(readSecretFile(fifo)).toEqual({ ok: false, message: `${fifo} is not a regular file` });
    // The checks apply to the file read through the link (secret mounts are links), not the link.
    const open = tokenFile(0o644);
    symlinkSync(open, join(d, 'link'));
    const r = readSecretFile(join(d, 'link'));
    expect(r.ok ? '' : r.message).toMatch(/mode 644\): chmod 600/);
    symlinkSync(tokenFile(0o600), join(d, 'link600'));
    expect(readSecretFile(join(d, 'link600'))).toEqual({ ok: true, value: 'secret-token-0123456789' });
  });

  it('mqd agent refuses a group-readable --token-file and plain HTTP to another machine', async () => {
    const c = capture();
    expect(
      await agentCommand(['--server', 'http://127.0.0.1:1', '--token-file', tokenFile(0o644)], c.io),
    ).toBe(2);
    expect(c.err.join('\n')).toMatch(/MQD_E_USAGE: .*chmod 600/);
    const d = capture();
    expect(
      await agentCommand(['--server', 'http://10.9.9.9:8080', '--token-file', tokenFile(0o600)], d.io),
    ).toBe(2);
    expect(d.err.join('\n')).toMatch(/MQD_E_INSECURE/);
  });

  it('mqd agent-token prints the token derived for a host', async () => {
    const c = capture();
    expect(await agentTokenCommand(['--host', 'node7', '--secret-file', tokenFile(0o600)], c.io)).toBe(0);
    expect(c.out).toEqual([hostAgentToken('secret-token-0123456789', 'node7')]);
  });
});
