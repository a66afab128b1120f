// `mqd ranks --attach PID` run as root against a starter of a real unprivileged user (uid 65534
// via setpriv), found by the root-side audit (docs/root-paths.md): a starter without
// MPIR symbols that maps a file named libpmix.so is asked for its job through PMIx, which loads
// that library. Root used to load it in its own process, running the user's constructor as
// uid 0; now a locate child that is the starter's owner does (locate-as-owner.ts).
import { chownSync, copyFileSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { type Attacker, buildAttacker, NOBODY, type Started, startProcess } from '@mqd/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ranksCommand } from '../src/ranks-cmd.js';

let a: Attacker;
let lib = '';
let starter: Started | null = null;

beforeAll(async () => {
  expect(process.getuid?.()).toBe(0);
  a = buildAttacker();
  // The user's own "libpmix.so": the DLL whose constructor appends its euid to a.out.
  lib = join(a.dir, 'libpmix.so');
  copyFileSync(a.evil, lib);
  chownSync(lib, NOBODY, NOBODY);
  // A process of the user's that maps it (preloaded) from start to end: the shell, then the
  // sleep it execs in the same pid (killed with it, nothing left behind).
  starter = await startProcess([
    'sh',
    '-c',
    `exec env LD_PRELOAD=${lib} sh -c 'echo FAKE_READY; exec sleep 600'`,
  ]);
}, 60_000);

afterAll(() => {
  starter?.kill();
  a?.dispose();
});

describe("mqd ranks --attach run as root on a user's fake PMIx starter", () => {
  it('loads the libpmix it maps only as the user: the constructor never runs as root', async () => {
    const pid = starter?.pid ?? -1;
    const out: string[] = [];
    const code = await ranksCommand(['--attach', String(pid), '--method', 'pmix'], {
      out: (s) => out.push(s),
      err: (s) => out.push(s),
    });
    expect(code).toBe(1);
    // The PMIx attempt got as far as loading the library (it has no PMIx_tool_init), as the user.
    expect(out.join('\n')).toMatch(/^MQD_E_PMIX: cannot load .*libpmix\.so/);
    const lines = readFileSync(a.out, 'utf8').trim().split('\n');
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(l).toBe(`euid=${NOBODY} uid=${NOBODY}`);
    rmSync(a.out, { force: true });
  });
});
