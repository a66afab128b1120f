// Launch under the tool through PMIx: Open MPI 5's `mpirun` execs PRRTE's prterun,
// which has no MPIR symbols. `mqd run` recognises prterun by what it maps, starts it with its
// ranks held in PMIx_Init (`--runtime-options stop-in-init`), reads the table as a PMIx tool,
// takes the optional first snapshot, and releases the ranks (PMIX_DEBUGGER_RELEASE). Real jobs
// of the Open MPI 5.0.7 build; the built CLI as a user runs it. Every job is killed after its
// test, whatever happened (the pids come from the table mqd printed, or from /proc).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DebugFileRegistry, nativeAllocations } from '@mqd/core';
import { descendants, isAlive, type LaunchedJob, launchUnderTool, localHost } from '@mqd/mpir';
import { fixtureBinary, parseReadyLines, starterCommand } from '@mqd/testkit';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { MQD, mqd } from './run-mqd.js';

interface Printed {
  job: {
    method: string;
    starter: { pid: number; command: string } | null;
    ranks: { rank: number; pid: number; host: string; executable: string }[];
  };
  snapshot: {
    ranks: {
      rank: number;
      pid: number;
      state: { kind: string };
      communicators: unknown[];
      mpiCall: { function: string } | null;
      threads: { main: boolean; frames: { function: string | null }[] }[];
    }[];
  } | null;
}

const here = localHost();
/** Pids of jobs the tests started (starters and ranks), and mqd processes: all must be gone. */
const started = new Set<number>();
let running: ChildProcess | null = null;

/** Processes whose command line contains `needle` (a fixture's path, a unique argument). */
function processesWith(needle: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' ').includes(needle))
        out.push(Number(d));
    } catch {
      // Exited meanwhile.
    }
  }
  return out;
}

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

afterEach(async () => {
  const mqdProc = running;
  running = null;
  if (mqdProc?.pid !== undefined) {
    // Its job (timeout, prterun, ranks) is below it until it dies: note them first.
    started.add(mqdProc.pid);
    for (const d of descendants(mqdProc.pid)) started.add(d.pid);
    if (mqdProc.exitCode === null && mqdProc.signalCode === null) mqdProc.kill('SIGTERM');
  }
  // What a failed test left behind goes; the assertion below says whether anything had to.
  const leftover = [...started].filter(isAlive);
  if (leftover.length > 0) {
    await waitFor(
      'the job to end after SIGTERM',
      () => ([...started].some(isAlive) ? undefined : true),
      10_000,
    ).catch(() => {
      for (const p of [...started].filter(isAlive)) process.kill(p, 'SIGKILL');
    });
  }
  await waitFor('every process to be gone', () => ([...started].some(isAlive) ? undefined : true), 10_000);
  started.clear();
  // Nothing a test started may outlive it by itself.
  expect(leftover).toEqual([]);
});

/**
 * Each command gets a TMPDIR of its own: prterun writes its PMIx rendezvous files under it
 * (prterun.<host>.<pid>.0/pmix.*) and the tool looks for them there. A prterun killed -9 by an
 * earlier test leaves its directory behind, and once the pid comes round again the tool finds
 * two servers for one pid ("PMIx has found multiple possible servers"): seen in a fresh-clone run.
 */
const tmpRoot = mkdtempSync(join(tmpdir(), 'mqd-pmix-launch-'));
afterAll(() => rmSync(tmpRoot, { recursive: true, force: true }));

function command(fixture: string, np: number) {
  const binary = fixtureBinary('openmpi5', fixture);
  const cmd = starterCommand('openmpi5', np, binary);
  const TMPDIR = mkdtempSync(join(tmpRoot, 'job-'));
  return { binary, argv: [cmd.file, ...cmd.args], env: { ...process.env, ...cmd.env, TMPDIR } };
}

/** The JSON document `mqd run --json` prints at the hold: it ends at the first "}" line. */
function printedDoc(out: string): { doc: Printed; end: number } | undefined {
  const end = out.indexOf('\n}\n');
  if (!out.startsWith('{') || end < 0) return undefined;
  return { doc: JSON.parse(out.slice(0, end + 2)) as Printed, end: end + 3 };
}

describe('Open MPI 5 (prterun): mqd run holds the ranks through PMIx', () => {
  it('ring_ok: every rank by pmix, a snapshot of every held rank, then the job completes with 0', async () => {
    const np = 4;
    const { binary, argv, env } = command('ring_ok', np);
    const r = await mqd(['run', '--snapshot', '--json', '--', ...argv], env);
    const printed = printedDoc(r.out);
    for (const p of [printed?.doc.job.starter?.pid, ...(printed?.doc.job.ranks.map((x) => x.pid) ?? [])])
      if (p !== undefined) started.add(p);
    expect(r.code, r.err).toBe(0);
    expect(printed).toBeDefined();
    if (!printed) return;
    const { job, snapshot } = printed.doc;
    expect(job.method).toBe('pmix');
    // prterun was started with the hold (mpirun execs it; mqd restarts it with the option).
    expect(job.starter?.command).toMatch(/\/prterun --runtime-options stop-in-init /);
    expect(job.ranks.map((x) => [x.rank, x.host, x.executable])).toEqual(
      Array.from({ length: np }, (_, i) => [i, here.short, binary]),
    );
    // The snapshot was taken while the ranks were held in PMIx_Init: every rank, readable.
    expect(snapshot?.ranks.map((x) => [x.rank, x.pid, x.state.kind])).toEqual(
      job.ranks.map((x) => [x.rank, x.pid, 'ok']),
    );
    // Where they were held: PMIx_Init, called from MPI_Init, before any communicator exists.
    for (const x of snapshot?.ranks ?? []) {
      const main = x.threads.find((t) => t.main)?.frames.map((f) => f.function) ?? [];
      expect(main.indexOf('PMIx_Init'), main.join(' < ')).toBeGreaterThan(-1);
      expect(main.indexOf('PMPI_Init')).toBeGreaterThan(main.indexOf('PMIx_Init'));
      expect(x.mpiCall?.function).toBe('MPI_Init');
      expect(x.communicators).toEqual([]);
    }
    // Held: no rank had got out of MPI_Init when mqd printed; each did after the release.
    const after = r.out.slice(printed.end);
    expect(r.out.slice(0, printed.end)).not.toMatch(/MQD_FIXTURE_READY/);
    expect(
      parseReadyLines(after)
        .map((x) => [x.rank, x.pid])
        .sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0)),
    ).toEqual(job.ranks.map((x) => [x.rank, x.pid]));
    expect(after.match(/MQD_FIXTURE_DONE/g)?.length).toBe(np);
    expect(job.ranks.filter((x) => isAlive(x.pid))).toEqual([]);
  });

  it('in-process (launchUnderTool): the PMIx connection holds one native block while open, none after', async () => {
    const { argv, env } = command('ring_ok', 2);
    // The probe's ELF files stay cached in the registry: warm it with a first launch.
    const registry = new DebugFileRegistry();
    const run = async (during: (owned: number) => void) => {
      let launched: LaunchedJob<number> | null = null;
      try {
        const r = await launchUnderTool(argv, {
          env,
          registry,
          stdio: 'pipe',
          atBreakpoint: (job) => {
            for (const x of job.ranks) started.add(x.pid);
            return nativeAllocations().owned;
          },
        });
        expect(r.ok ? 'ok' : r.error.message).toBe('ok');
        if (!r.ok) return;
        launched = r.value;
        started.add(r.value.starterPid);
        expect(r.value.job.method).toBe('pmix');
        during(r.value.atBreakpoint ?? -1);
        expect(await r.value.wait(), r.value.output()).toEqual({ code: 0, signal: null });
      } finally {
        await launched?.dispose();
      }
    };
    await run(() => {});
    const before = nativeAllocations().owned;
    // While held: the tool's own pmix_proc_t (PmixTool) only; after the release, nothing.
    await run((owned) => expect(owned - before).toBe(1));
    expect(nativeAllocations().owned).toBe(before);
  });

  it('through a wrapper (env) and with runtime options of its own: followed to prterun, options merged', async () => {
    const binary = fixtureBinary('openmpi5', 'ring_ok');
    const cmd = starterCommand('openmpi5', 2, binary);
    const argv = ['env', 'MQD_WRAPPED=1', cmd.file, '--runtime-options', 'error-nonzero-status', ...cmd.args];
    const r = await mqd(['run', '--json', '--', ...argv], { ...process.env, ...cmd.env });
    const printed = printedDoc(r.out);
    for (const p of [printed?.doc.job.starter?.pid, ...(printed?.doc.job.ranks.map((x) => x.pid) ?? [])])
      if (p !== undefined) started.add(p);
    expect(r.code, r.err).toBe(0);
    const command = printed?.doc.job.starter?.command ?? '';
    expect(printed?.doc.job.method).toBe('pmix');
    expect(printed?.doc.job.ranks.map((x) => x.rank)).toEqual([0, 1]);
    // PRRTE refuses --runtime-options twice: the hold joins the user's own.
    expect(command).toContain('--runtime-options error-nonzero-status,stop-in-init ');
    expect(command.match(/--runtime-options/g)?.length).toBe(1);
    expect(r.out.match(/MQD_FIXTURE_DONE/g)?.length).toBe(2);
  });

  it('a hanging fixture: the table, the release (every rank reaches its hang), and the job goes on SIGTERM', async () => {
    const np = 4;
    const { argv, env } = command('wrong_tag', np);
    const child = spawn(process.execPath, [MQD, 'run', '--json', '--', ...argv], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running = child;
    if (child.pid !== undefined) started.add(child.pid);
    let out = '';
    let errText = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    child.stderr?.setEncoding('utf8').on('data', (d: string) => {
      errText += d;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
      child.on('exit', (code, signal) => res({ code, signal })),
    );
    const printed = await waitFor('the table', () => {
      if (child.exitCode !== null) throw new Error(`mqd run exited ${child.exitCode}: ${errText}`);
      return printedDoc(out);
    });
    const { job } = printed.doc;
    for (const p of [job.starter?.pid, ...job.ranks.map((x) => x.pid)]) if (p !== undefined) started.add(p);
    expect(job.method).toBe('pmix');
    expect(job.ranks.map((x) => x.rank)).toEqual([0, 1, 2, 3]);
    // Released: every rank gets to the call it hangs in, and says so with the table's pid.
    const ready = await waitFor('every READY line', () => {
      const lines = parseReadyLines(out.slice(printed.end));
      return lines.length === np ? lines : undefined;
    });
    expect(ready.map((x) => [x.rank, x.pid]).sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0))).toEqual(
      job.ranks.map((x) => [x.rank, x.pid]),
    );
    // mqd passes SIGTERM on to prterun, which takes its ranks down; mqd exits with the status.
    child.kill('SIGTERM');
    const exit = await exited;
    expect(exit.signal).toBeNull();
    expect(exit.code).not.toBe(0);
    await waitFor('the job to be gone', () =>
      [job.starter?.pid ?? 0, ...job.ranks.map((x) => x.pid)].some(isAlive) ? undefined : true,
    );
  });

  it('a program that does not exist: MQD_E_PMIX_LAUNCH, and nothing is left running', async () => {
    const { argv, env } = command('ring_ok', 2);
    const bogus = `${argv.at(-1)}_no_such_program_4711`;
    const r = await mqd(['run', '--', ...argv.slice(0, -1), bogus], env);
    expect(r.code).toBe(1);
    const m =
      /^MQD_E_PMIX_LAUNCH: prterun \(pid (\d+)\) exited with code \d+ before every rank reached PMIx_Init/m.exec(
        r.err,
      );
    expect(m, r.err).not.toBeNull();
    started.add(Number(m?.[1]));
    expect(isAlive(Number(m?.[1]))).toBe(false);
    expect(processesWith('no_such_program_4711')).toEqual([]);
  });

  it('ranks that never call PMIx_Init (not an MPI program): MQD_E_PMIX_LAUNCH after --timeout, the job killed', async () => {
    const { argv, env } = command('ring_ok', 2);
    // `sleep` is no PMIx client: it never connects, so it is never held.
    const r = await mqd(['run', '--timeout', '8', '--', ...argv.slice(0, -1), 'sleep', '4711'], env);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /^MQD_E_PMIX_LAUNCH: the ranks were not all held in PMIx_Init within 8000 ms \(not yet in PMIx_Init: rank 0, 1\)/m,
    );
    const left = processesWith('sleep 4711');
    for (const p of left) started.add(p);
    expect(left.filter(isAlive)).toEqual([]);
  });
});
