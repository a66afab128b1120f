// The suite's closing check (scripts/tracing-stops.mjs, run by vitest's globalSetup teardown and
// scripts/test.sh) against a real leaked stop: a child in a tracing stop whose tracer lives on.
// It is named when it belongs to the run, and not when it started before the run did.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { waitFor } from './conformance-kit.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const SCRIPT = join(ROOT, 'scripts/tracing-stops.mjs');
const work = mkdtempSync('/tmp/mqd-tracing-stops-');
const pairExe = join(work, 'traced_pair');
execFileSync('cc', ['-o', pairExe, fileURLToPath(new URL('../native/stall/traced_pair.c', import.meta.url))]);

function startTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[22 - 3]);
}

let pair: { child: ChildProcess; tracer: number; tracee: number } | null = null;
afterEach(() => {
  if (!pair) return;
  // The tracee first: with its tracer gone it would take its SIGSTOP and stay stopped (T).
  try {
    process.kill(pair.tracee, 'SIGKILL');
  } catch {
    // already reaped
  }
  pair.child.kill('SIGKILL');
  pair = null;
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

async function startPair(): Promise<{ child: ChildProcess; tracer: number; tracee: number }> {
  const child = spawn(pairExe, [], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  await waitFor(() => /PAIR tracer=\d+ tracee=\d+/.test(out) || child.exitCode !== null, 10_000);
  const m = /PAIR tracer=(\d+) tracee=(\d+)/.exec(out);
  if (!m) throw new Error(`traced_pair said: ${out}`);
  pair = { child, tracer: Number(m[1]), tracee: Number(m[2]) };
  return pair;
}

function check(since: number): { status: number | null; out: string; report: unknown } {
  const report = join(work, 'report.json');
  const r = spawnSync(
    process.execPath,
    [SCRIPT, '--since', String(since), '--settle', '300', '--report', report],
    { encoding: 'utf8' },
  );
  return { status: r.status, out: r.stdout + r.stderr, report: JSON.parse(readFileSync(report, 'utf8')) };
}

describe('the closing check for tracing stops', () => {
  it("names a thread of the run left in a tracing stop and its tracer, in the runners' report shape", async () => {
    const since = startTicks(process.pid);
    const p = await startPair();
    const r = check(since);
    expect(r.status).toBe(1);
    expect(r.out).toContain(`pid ${p.tracee} thread ${p.tracee} state t traced by pid ${p.tracer}`);
    expect(r.report).toMatchObject({
      testResults: [{ status: 'failed', assertionResults: [{ status: 'failed' }] }],
    });
  });

  it('passes once the leftover is gone, and never names a process older than the run', async () => {
    const p = await startPair();
    // A run that started after the pair: the pair is someone else's.
    const later = startTicks(p.tracee) + 1;
    expect(check(later).status).toBe(0);
    // Killed, it is a zombie its tracer has not reaped: not stopped, nothing to report.
    process.kill(p.tracee, 'SIGKILL');
    await waitFor(() => {
      try {
        return /^State:\s+Z/m.test(readFileSync(`/proc/${p.tracee}/status`, 'utf8'));
      } catch {
        return true;
      }
    }, 10_000);
    const r = check(startTicks(process.pid));
    expect(r.status, r.out).toBe(0);
    expect(r.report).toMatchObject({
      testResults: [{ status: 'passed', assertionResults: [{ status: 'passed' }] }],
    });
  });
});
