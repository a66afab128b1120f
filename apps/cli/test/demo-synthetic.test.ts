// `npm run demo`'s first minutes, without an MPI build: scripts/demo.mjs from the sources, its
// provisioning replaced by a shell command the test holds on a FIFO (--provision-cmd), and the
// "real" job played by a second synthetic job (--stand-in-real), so no MPI library is needed.
// What is checked is what a person reads: the link printed, the job list's label, the page's
// banner made from the status file the server serves, and the move to the "real" job.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type DemoRunStatus, demoBannerText, demoMoveTo, JobId, parseDemoStatus } from '@mqd/model';
import { done, failed, pending, trySignal, waitFor } from '@mqd/testkit';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';

const REPO = fileURLToPath(new URL('../../..', import.meta.url));
const DEMO = join(REPO, 'scripts/demo.mjs');
// The first start transpiles the server's sources (tsx); on a busy 2-core machine that took ~60 s.
const START_MS = 150_000;
const TEST_MS = 2 * START_MS;

interface Demo {
  readonly child: ChildProcess;
  readonly dir: string;
  readonly fifo: string;
  out(): string;
  exited(): boolean;
}

const started: Demo[] = [];

/** The pid the held provisioning printed, once it runs. */
const provisionPid = (d: Demo): number | null => {
  const m = /\[provision\] pid (\d+)/.exec(d.out());
  return m?.[1] === undefined ? null : Number(m[1]);
};

afterEach(() => {
  for (const d of started.splice(0)) {
    const p = provisionPid(d);
    if (p !== null) trySignal(-p, 'SIGKILL');
    if (!d.exited() && d.child.pid !== undefined) trySignal(d.child.pid, 'SIGKILL');
    rmSync(d.dir, { recursive: true, force: true });
  }
});

/** The demo with a provisioning that says it builds Open MPI, then waits on the FIFO (or runs `provision`). */
function startDemo(provision?: string): Demo {
  const dir = mkdtempSync(join(tmpdir(), 'mqd-demo-'));
  const fifo = join(dir, 'go');
  execFileSync('mkfifo', [fifo]);
  const held =
    provision ??
    `echo "[provision] pid $$" >&2; echo '[provision] openmpi 4.1.4: building from openmpi_4.1.4.orig.tar.bz2' >&2; ` +
      `cat ${fifo} >/dev/null; echo '[provision] openmpi 4.1.4: built in 1 s, 1 CPU-s' >&2`;
  const args = ['--data-dir', join(dir, 'data'), '--port', '0', '--stand-in-real', '--provision-cmd', held];
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', DEMO, ...args], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const chunks: string[] = [];
  child.stdout?.setEncoding('utf8').on('data', (s: string) => chunks.push(s));
  child.stderr?.setEncoding('utf8').on('data', (s: string) => chunks.push(s));
  let exit = false;
  child.on('close', () => {
    exit = true;
  });
  const d: Demo = { child, dir, fifo, out: () => chunks.join(''), exited: () => exit };
  started.push(d);
  // What the demo said is the first thing to read when a step here fails.
  onTestFailed(() => {
    console.error(`the demo's output:\n${d.out().slice(-6000)}`);
  });
  return d;
}

/** The login link printed after `after` (the first one is the aggregator's own). */
function demoLink(d: Demo, after: string): URL | null {
  const text = d.out();
  const at = text.indexOf(after);
  if (at < 0) return null;
  const m = /(http:\/\/127\.0\.0\.1:\d+\/\?token=[^\s]+)/.exec(text.slice(at));
  return m?.[1] === undefined ? null : new URL(m[1]);
}

async function status(origin: string): Promise<DemoRunStatus | null> {
  const r = await fetch(`${origin}/demo-status.json`);
  return r.ok ? parseDemoStatus(await r.json()) : null;
}

/** Waits for the status to reach `phase`. */
function statusIn(d: Demo, origin: string, phase: DemoRunStatus['phase']): Promise<DemoRunStatus> {
  return waitFor(
    async () => {
      if (d.exited()) return failed(`the demo exited: ${d.out()}`);
      const s = await status(origin);
      return s?.phase === phase ? done(s) : pending(s?.phase);
    },
    { timeoutMs: START_MS, what: `the demo's status to be ${phase}` },
  );
}

async function jobs(origin: string, token: string): Promise<{ id: string; command: string }[]> {
  const r = await fetch(`${origin}/api/jobs`, { headers: { authorization: `Bearer ${token}` } });
  return ((await r.json()) as { jobs: { id: string; command: string }[] }).jobs;
}

async function stopDemo(d: Demo): Promise<void> {
  if (d.child.pid !== undefined) trySignal(d.child.pid, 'SIGINT');
  await waitFor(() => (d.exited() ? done(true) : pending()), { timeoutMs: 20_000, what: 'the demo to end' });
}

const firstLink = (d: Demo) =>
  waitFor(
    () => {
      if (d.exited()) return failed(`the demo exited: ${d.out()}`);
      const u = demoLink(d, 'on a SYNTHETIC job');
      return u ? done(u) : pending();
    },
    { timeoutMs: START_MS, what: 'the synthetic job link' },
  );

describe('npm run demo: the synthetic job first, then the real one', () => {
  it(
    'shows a labelled synthetic job with the build and its time left, then moves to the real job',
    async () => {
      const d = startDemo();
      const link = await firstLink(d);
      const token = link.searchParams.get('token') ?? '';
      const synth = await statusIn(d, link.origin, 'building');

      // The printed link opens the synthetic job, and the job list says what it is.
      expect(link.searchParams.get('job')).toBe(synth.syntheticJob);
      const listed = await jobs(link.origin, token);
      expect(listed.find((j) => j.id === synth.syntheticJob)?.command).toMatch(
        /^SYNTHETIC .*not a real MPI job/,
      );
      // The page's banner: the label, what is built, the measured time left.
      expect(synth.step).toBe('Building Open MPI 4.1.4 with debug information for the real hung job');
      expect(synth.estimateSeconds).toBeGreaterThan(0);
      expect(synth.estimateBasis).toMatch(/^measured: 450 s/);
      const text = demoBannerText(synth, JobId(synth.syntheticJob ?? ''), synth.stepStartedAt + 60_000);
      expect(text).toContain('SYNTHETIC job: made up by the demo, not a real MPI job.');
      expect(text).toContain(`Building Open MPI 4.1.4 with debug information for the real hung job: about `);
      expect(text).toContain('left (measured: 450 s alone on an idle 2-core machine)');
      expect(demoMoveTo(synth, JobId(synth.syntheticJob ?? ''))).toBeNull();
      // The file is served to anyone who can reach the port: it must hold no credential.
      const raw = await (await fetch(`${link.origin}/demo-status.json`)).text();
      expect(raw).not.toContain(token);
      // One length for every version: a poll that meets a rewrite still gets a whole file.
      expect(raw).toHaveLength(4096);

      // The build ends: the "real" job is attached and the status names it.
      writeFileSync(d.fifo, 'go\n');
      const real = await statusIn(d, link.origin, 'real');
      expect(real.job).not.toBe(synth.syntheticJob);
      expect(real.syntheticJob).toBe(synth.syntheticJob);
      expect((await jobs(link.origin, token)).map((j) => j.id)).toContain(real.job);
      // A page still on the synthetic job moves to the real one; one on the real job shows nothing.
      expect(demoMoveTo(real, JobId(synth.syntheticJob ?? ''))).toBe(real.job);
      expect(demoBannerText(real, JobId(real.job ?? ''), Date.now())).toBeNull();
      // And the demo prints a link to the real job.
      const second = await waitFor(
        () => {
          const u = demoLink(d, 'attached the real job');
          return u ? done(u) : pending();
        },
        { timeoutMs: START_MS, what: 'the real job link' },
      );
      expect(second.searchParams.get('job')).toBe(real.job);
      expect(second.searchParams.get('token')).toBe(token);

      await stopDemo(d);
      expect(d.child.exitCode).toBe(0);
      // The status file goes with the demo: a later `mqd serve` shows no demo banner.
      expect(existsSync(join(d.dir, 'data', 'demo-web'))).toBe(false);
    },
    TEST_MS,
  );

  it(
    'Ctrl-C during the build ends the provisioning too',
    async () => {
      const d = startDemo();
      const link = await firstLink(d);
      await statusIn(d, link.origin, 'building');
      const p = await waitFor(
        () => {
          const pid = provisionPid(d);
          return pid === null ? pending() : done(pid);
        },
        { timeoutMs: START_MS, what: "the provisioning's pid" },
      );
      await stopDemo(d);
      expect(d.child.exitCode).toBe(0);
      // Its process group was signalled: nothing of it is left blocked on the FIFO.
      await waitFor(
        () => {
          try {
            process.kill(p, 0);
            return pending(`pid ${p} alive`);
          } catch {
            return done(true); // ESRCH: gone
          }
        },
        { timeoutMs: 10_000, what: `provisioning pid ${p} to end` },
      );
    },
    TEST_MS,
  );

  it(
    'a failed build leaves the dashboard up on the synthetic job and says so',
    async () => {
      const d = startDemo(
        `echo '[provision] openmpi 4.1.4: building from x' >&2; echo 'MQD_E_PROVISION: openmpi build failed' >&2; exit 1`,
      );
      const link = await firstLink(d);
      const st = await statusIn(d, link.origin, 'failed');
      expect(st.job).toBe(st.syntheticJob);
      const text = demoBannerText(st, JobId(st.syntheticJob ?? ''), Date.now());
      expect(text).toContain('SYNTHETIC job');
      expect(text).toContain('The Open MPI 4.1.4 build failed');
      expect(text).toContain('MQD_E_PROVISION: openmpi build failed');
      await stopDemo(d);
    },
    TEST_MS,
  );
});
