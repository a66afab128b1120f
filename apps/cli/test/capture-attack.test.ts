// `mqd capture` and `mqd snapshot --attach` run as root against a real unprivileged user
// (uid 65534 via setpriv): a fake rank naming /etc/shadow as its DLL, links planted
// in and as the capture directory, and a fake starter listing root's process. The commands run
// in this (root) process, as `mqd` would run them; the attacker's processes and files are its own.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  type Attacker,
  buildAttacker,
  NOBODY,
  type Started,
  startProcess,
  watchPid,
} from '@mqd/core/testing';
import type { JobSnapshot } from '@mqd/model';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { captureCommand } from '../src/capture-cmd.js';
import { CaptureOwner } from '../src/capture-owner.js';
import { snapshotCommand } from '../src/snapshot-cmd.js';

let a: Attacker;
/** A root-only directory with a file in it: what the attacks try to reach. */
let vault = '';
/** Root's 0755 directory (the owner cannot create in it) and a sticky world-writable one. */
let rootBase = '';
let sticky = '';
const started: Started[] = [];

beforeAll(() => {
  expect(process.getuid?.()).toBe(0); // these tests are about root running the CLI
  a = buildAttacker();
  rootBase = mkdtempSync('/tmp/mqd-capture-attack-');
  chmodSync(rootBase, 0o755);
  vault = join(rootBase, 'vault');
  mkdirSync(vault, { mode: 0o700 });
  writeFileSync(join(vault, 'secret'), 'root only\n', { mode: 0o600 });
  sticky = join(rootBase, 'sticky');
  mkdirSync(sticky);
  chmodSync(sticky, 0o1777);
});
afterEach(() => {
  while (started.length) started.pop()?.kill();
});
afterAll(() => {
  a?.dispose();
  if (rootBase !== '') rmSync(rootBase, { recursive: true, force: true });
});

async function run(cmd: typeof captureCommand, argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await cmd(argv, { out: (s) => out.push(s), err: (s) => err.push(s) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

/** As the attacker (uid 65534): a shell command. */
function asNobody(script: string): void {
  execFileSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'sh', '-c', script], {
    stdio: 'pipe',
  });
}

/** Every entry under `dir` (not following links) with its owner. */
function tree(dir: string): { path: string; uid: number; link: boolean }[] {
  const out: { path: string; uid: number; link: boolean }[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      const st = lstatSync(p);
      out.push({ path: p, uid: st.uid, link: st.isSymbolicLink() });
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

function vaultUntouched(): void {
  const st = lstatSync(vault);
  expect([st.uid, st.mode & 0o7777]).toEqual([0, 0o700]);
  expect(readdirSync(vault)).toEqual(['secret']);
  expect(lstatSync(join(vault, 'secret')).uid).toBe(0);
}

async function fakeRank(dll: string): Promise<Started> {
  const r = await startProcess([a.rank, dll], { env: { OMPI_COMM_WORLD_RANK: '0' } });
  started.push(r);
  return r;
}

describe('mqd capture --bundle run as root, against uid 65534', () => {
  it('the capture directory is made by a child that is the owner: uid/gid 65534, no groups, NO_NEW_PRIVS', async () => {
    const owner = new CaptureOwner(NOBODY, NOBODY);
    try {
      const c = await owner.credentials();
      expect(c.ok ? c.value : c.error).toMatchObject({
        uid: NOBODY,
        euid: NOBODY,
        gid: NOBODY,
        egid: NOBODY,
        groups: [],
        noNewPrivs: true,
      });
    } finally {
      owner.dispose();
    }
  });

  it("a rank naming /etc/shadow as its DLL: the bundle never holds root's file; all of DIR is the owner's", async () => {
    const rank = await fakeRank('/etc/shadow');
    // A new directory under root's 0755 one: the owner cannot create it, root does and gives it.
    const dir = join(rootBase, 'shadow-capture');
    const r = await run(captureCommand, ['--pid', `${rank.pid}:0`, '--out', dir, '--bundle', '--json']);
    expect(r.code, r.err).toBe(0);
    expect(existsSync(join(dir, 'sysroot', 'etc', 'shadow'))).toBe(false);
    expect(r.err).toMatch(/not bundled: \/etc\/shadow is not readable/);
    // The rank's own files are there, copied by the owner.
    expect(readFileSync(join(dir, 'sysroot', a.rank)).equals(readFileSync(a.rank))).toBe(true);
    expect(lstatSync(dir).uid).toBe(NOBODY);
    const entries = tree(dir);
    expect(entries.length).toBeGreaterThan(3);
    expect(entries.filter((e) => e.uid !== NOBODY || e.link)).toEqual([]);
    // The printed manifest is the one written.
    expect(JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'))).toEqual(JSON.parse(r.out));
  });

  it('the DLL a rank names, when its owner can read it, is bundled at the named path (a link copied as its file)', async () => {
    const link = join(a.dir, 'libdll-link.so');
    asNobody(`ln -sf ${a.evil} ${link}`);
    const rank = await fakeRank(link);
    const dir = join(sticky, 'dll');
    const r = await run(captureCommand, ['--pid', `${rank.pid}:0`, '--out', dir, '--bundle']);
    expect(r.code, r.err).toBe(0);
    const copy = join(dir, 'sysroot', link);
    expect(lstatSync(copy).isFile()).toBe(true);
    expect(readFileSync(copy).equals(readFileSync(a.evil))).toBe(true);
    expect(tree(dir).filter((e) => e.uid !== NOBODY || e.link)).toEqual([]);
  });

  it('a link planted under DIR/sysroot is never followed: nothing is written or chowned through it', async () => {
    const rank = await fakeRank(a.evil);
    const dir = join(sticky, 'planted');
    // The attacker's own capture directory, with sysroot/tmp -> root's vault.
    asNobody(`mkdir -p ${dir}/sysroot && ln -s ${vault} ${dir}/sysroot/tmp`);
    const r = await run(captureCommand, ['--pid', `${rank.pid}:0`, '--out', dir, '--bundle']);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/not bundled: \/tmp\/mqd-attacker-[^ ]+ is not a directory/);
    vaultUntouched();
    expect(lstatSync(join(dir, 'sysroot', 'tmp')).isSymbolicLink()).toBe(true);
    expect(tree(dir).filter((e) => e.uid !== NOBODY)).toEqual([]);
  });

  it('--out planted as a link to a root directory: refused with MQD_E_CAPTURE_DIR, nothing written or chowned', async () => {
    const rank = await fakeRank(a.evil);
    const dir = join(sticky, 'link-out');
    asNobody(`ln -s ${vault} ${dir}`);
    const r = await run(captureCommand, ['--pid', `${rank.pid}:0`, '--out', dir, '--bundle']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^MQD_E_CAPTURE_DIR: .*is a symbolic link or not a directory/);
    vaultUntouched();
  });

  it('a parent of --out planted as a link: root does not create the directory through it', async () => {
    const rank = await fakeRank(a.evil);
    asNobody(`ln -s ${vault} ${sticky}/parent-link`);
    // The owner cannot create vault/out (root's 0700 vault), and root refuses a path through a user's link.
    const r = await run(captureCommand, [
      '--pid',
      `${rank.pid}:0`,
      '--out',
      join(sticky, 'parent-link', 'out'),
    ]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^MQD_E_CAPTURE_DIR: the job owner \(uid 65534\) cannot create/);
    vaultUntouched();
  });

  it('manifest.json planted as a link: refused before anything is stopped; the link target is not created', async () => {
    const rank = await fakeRank(a.evil);
    const dir = join(sticky, 'manifest-link');
    const target = join(rootBase, 'made-by-root');
    asNobody(`mkdir ${dir} && ln -s ${target} ${dir}/manifest.json`);
    const watch = await watchPid(rank.pid);
    const r = await run(captureCommand, ['--pid', `${rank.pid}:0`, '--out', dir]);
    const seen = await watch.stop();
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^MQD_E_CAPTURE_DIR: .*already holds a capture/);
    expect(existsSync(target)).toBe(false);
    expect(seen.tracers).toEqual([]);
  });

  it("an existing directory of root's for a user's job: refused, not given away", async () => {
    const rank = await fakeRank(a.evil);
    const dir = mkdtempSync(join(rootBase, 'roots-'));
    const r = await run(captureCommand, ['--pid', `${rank.pid}:0`, '--out', dir]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^MQD_E_CAPTURE_DIR: .*belongs to uid 0, not to the job owner \(uid 65534\)/);
    expect(lstatSync(dir).uid).toBe(0);
    expect(readdirSync(dir)).toEqual([]);
  });
});

describe("--attach run as root: the starter's owner is the job owner", () => {
  it("a fake starter of 65534 listing root's process: refused with MQD_E_FOREIGN_PROCESS, never stopped", async () => {
    rmSync(a.out, { force: true });
    const victim = await startProcess([a.rank, a.evil], { asRoot: true, env: { OMPI_COMM_WORLD_RANK: '0' } });
    started.push(victim);
    const starter = await startProcess([a.starter, String(victim.pid)]);
    started.push(starter);
    const watch = await watchPid(victim.pid);
    const snap = await run(snapshotCommand, ['--attach', String(starter.pid), '--json']);
    const cap = await run(captureCommand, ['--attach', String(starter.pid), '--out', join(sticky, 'attach')]);
    const seen = await watch.stop();
    expect(snap.code, snap.err).toBe(1);
    const s = JSON.parse(snap.out) as JobSnapshot;
    expect(s.ranks.map((r) => [r.pid, r.state.kind === 'error' ? r.state.code : r.state.kind])).toEqual([
      [victim.pid, 'MQD_E_FOREIGN_PROCESS'],
    ]);
    expect(cap.code, cap.err).toBe(1);
    expect(cap.out).toMatch(/not captured: MQD_E_FOREIGN_PROCESS/);
    expect(existsSync(join(sticky, 'attach', 'rank-0.core'))).toBe(false);
    // Root's process was never stopped or traced, and its DLL never loaded (by anyone).
    expect(seen.samples).toBeGreaterThan(0);
    expect(seen.tracers).toEqual([]);
    expect(seen.states).not.toContain('t');
    expect(seen.states).not.toContain('T');
    expect(existsSync(a.out)).toBe(false);
  });
});
