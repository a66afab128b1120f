// The systemd unit shipped for site agents (docs/deploy/mqd-agent.service): systemd's
// own checker accepts it (`systemd-analyze verify`, with ExecStart pointed at this checkout's
// built CLI instead of /usr/local/bin/mqd), its ExecStart names the `mqd` command of this
// package, and `mqd agent` accepts exactly those flags (the real command, run in-process with
// the unit's files replaced by test files of the same kind, stopped right after it starts).
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCommand } from '../src/agent-cmd.js';
import { MQD } from './run-mqd.js';

const UNIT = fileURLToPath(new URL('../../../docs/deploy/mqd-agent.service', import.meta.url));
const CLI_PACKAGE = fileURLToPath(new URL('../package.json', import.meta.url));

type Sections = Map<string, Map<string, string[]>>;

/** systemd's unit syntax as this file uses it: [Section], Key=Value, # and ; comments. */
function parseUnit(text: string): Sections {
  const sections: Sections = new Map();
  let current: Map<string, string[]> | null = null;
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    if (line.endsWith('\\')) throw new Error(`line ${i + 1}: continuation lines are not expected here`);
    const head = /^\[([A-Za-z]+)\]$/.exec(line);
    if (head?.[1]) {
      current = new Map();
      sections.set(head[1], current);
      continue;
    }
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (!kv?.[1] || current === null) throw new Error(`line ${i + 1} is not Key=Value in a section: ${line}`);
    current.set(kv[1], [...(current.get(kv[1]) ?? []), kv[2] ?? '']);
  }
  return sections;
}

function one(s: Sections, section: string, key: string): string {
  const v = s.get(section)?.get(key);
  if (v?.length !== 1 || v[0] === undefined)
    throw new Error(`[${section}] ${key} must be set once, got ${v}`);
  return v[0];
}

const unitText = readFileSync(UNIT, 'utf8');
const unit = parseUnit(unitText);
const execStart = one(unit, 'Service', 'ExecStart');
// The unit quotes nothing, so splitting on blanks is systemd's own split here.
const argv = execStart.split(/\s+/);

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'mqd-deploy-unit-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('docs/deploy/mqd-agent.service', () => {
  it('runs `mqd agent` of this package, with the token from a file, as a service', () => {
    expect(execStart).not.toMatch(/["'$%]/);
    expect(argv[0]).toBe('/usr/local/bin/mqd');
    const bin = (JSON.parse(readFileSync(CLI_PACKAGE, 'utf8')) as { bin: Record<string, string> }).bin;
    expect(Object.keys(bin)).toContain(basename(argv[0] ?? ''));
    // The file `npm install -g` links as /usr/local/bin/mqd is the built CLI's entry.
    expect(fileURLToPath(new URL(bin['mqd'] ?? '', `file://${CLI_PACKAGE}`))).toBe(MQD);
    accessSync(MQD, constants.X_OK);
    expect(readFileSync(MQD, 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
    expect(argv[1]).toBe('agent');
    expect(argv).toContain('--token-file');
    expect(argv).not.toContain('--token');
    expect(one(unit, 'Install', 'WantedBy')).toBe('multi-user.target');
    // The agent opens the ranks' executables and MPI libraries by their paths, which may lie in
    // /tmp: a private /tmp would hide them.
    expect(unit.get('Service')?.get('PrivateTmp') ?? ['no']).toEqual(['no']);
    // The reader child switches to each rank's owner and traces it: these capabilities at least.
    const caps = one(unit, 'Service', 'CapabilityBoundingSet').split(/\s+/);
    expect(caps).toEqual(expect.arrayContaining(['CAP_SYS_PTRACE', 'CAP_SETUID', 'CAP_SETGID']));
  });

  it('gives `mqd agent` only flags it accepts (the real command, stopped once started)', async () => {
    // The unit's files, replaced by real ones of the same kind: a 0600 token file of ours and a CA.
    const token = join(dir, 'agent.token');
    writeFileSync(token, 'token-for-the-unit-test-0123456789\n', { mode: 0o600 });
    const key = join(dir, 'ca.key');
    const ca = join(dir, 'ca.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        key,
        '-out',
        ca,
        '-days',
        '1',
        '-subj',
        '/CN=mqd-test-ca',
      ],
      { stdio: 'ignore' },
    );
    const files: Record<string, string> = { '/etc/mqd/agent.token': token, '/etc/mqd/ca.pem': ca };
    const args = argv.slice(2).map((a) => files[a] ?? a);
    expect(args.filter((a) => a.startsWith('/etc/'))).toEqual([]);
    const run = async (a: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await agentCommand(
        a,
        { out: (s) => out.push(s), err: (s) => err.push(s) },
        { untilStopped: Promise.resolve() },
      );
      return { code, out: out.join('\n'), err: err.join('\n') };
    };
    const ok = await run(args);
    expect(ok.code, ok.err).toBe(0);
    const server = args[args.indexOf('--server') + 1] ?? '';
    expect(server).toMatch(/^https:\/\//);
    expect(ok.out).toMatch(
      new RegExp(`^mqd agent \\S+ for host \\S+ connecting to ${server.replaceAll('.', '\\.')}$`),
    );
    // The same command with a flag it does not know is refused: the check above is real.
    const bad = await run([...args, '--no-such-flag']);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/^MQD_E_USAGE: .*--no-such-flag/);
  });

  it('passes systemd-analyze verify with ExecStart on the built CLI', () => {
    if (!existsSync('/usr/bin/systemd-analyze')) {
      throw new Error(
        'MQD_E_PROVISION: systemd-analyze is missing: apt-get install systemd (no need to run it)',
      );
    }
    const verify = (text: string) => {
      const file = join(dir, 'mqd-agent.service');
      writeFileSync(file, text);
      const r = spawnSync('systemd-analyze', ['verify', file], { encoding: 'utf8' });
      return { code: r.status, err: `${r.stdout}${r.stderr}`.trim() };
    };
    const here = unitText.replace(/^ExecStart=\/usr\/local\/bin\/mqd /m, `ExecStart=${MQD} `);
    expect(here).not.toBe(unitText);
    expect(verify(here)).toEqual({ code: 0, err: '' });
    // systemd-analyze does read our file: a typo and a relative program are reported.
    expect(verify(here.replace(/^Restart=/m, 'Restartt=')).err).toMatch(/Unknown key 'Restartt'/);
    expect(verify(here.replace(/^ExecStart=\S+ /m, 'ExecStart=bin/mqd ')).code).not.toBe(0);
  });
});
