// Triage at cluster scale: a synthetic store of 10,000 jobs (9,000 ended, 980 live, 20 hung; as
// many discovered watch jobs for the Fleet), served by the real aggregator and drawn by the real
// dashboard in Debian's chromium. Measured from navigation: Jobs and Fleet until their first 20
// rows are the 20 hung jobs, and a search by program name until it shows that one job alone.
// Baseline in the same run: the same with 100 jobs (2 hung). Target: < 1 s at 10,000 jobs.
// The API alone too: GET /api/jobs whole, its first page (every live job, 100 ended) and a search.
// Run from the repository root after npm run build: node --conditions=source --import tsx e2e/bench/triage.bench.ts
// Writes bench/results/triage.json.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { JobId, SnapshotId } from '@mqd/model';
import { type JobRecord, loadConfig, openStore, type SnapshotMeta, serve } from '@mqd/server';
import { chromium, type Page } from 'playwright-core';

const ADMIN = 'admin-token-for-the-triage-bench-0123456789abcdef';
const TARGET_MS = 1000;
const T0 = Date.now() - 3_600_000;
const RANKS = 4;

interface Scale {
  readonly jobs: number;
  readonly hung: number;
  readonly ended: number;
}

const program = (i: number, hungIndex: number | null) =>
  hungIndex === null ? `solver${i}` : `stuck${hungIndex}`;

async function seed(dir: string, s: Scale): Promise<void> {
  const store = await openStore({
    storeUrl: null,
    dataDir: dir,
    retention: { maxSnapshotsPerJob: 100, maxAgeSeconds: 30 * 86_400, auditAgeSeconds: 30 * 86_400 },
  });
  const body = gzipSync(Buffer.from('{}'));
  for (let i = 0; i < s.jobs; i++) {
    const hungIndex = i >= s.jobs - s.hung ? i - (s.jobs - s.hung) : null;
    const ended = i < s.ended;
    const host = `node${String(i % 64).padStart(3, '0')}`;
    const job: JobRecord = {
      id: JobId(`job${i}`),
      host,
      starterPid: 10_000 + i,
      starterStartTime: String(i),
      uid: 1000 + (i % 40),
      command: `mpirun -np ${RANKS} ./${program(i, hungIndex)}`,
      method: 'mpir-proctable',
      ranks: Array.from({ length: RANKS }, (_, r) => ({ rank: r, pid: 20_000 + i * RANKS + r, host })),
      createdAt: T0 + i,
      createdBy: 'admin',
      endedAt: ended ? T0 + 1_800_000 : null,
    };
    await store.saveJob(job, { who: 'admin', action: 'attach', jobId: job.id });
    // Three snapshots: a hung job's equal with receives pending, the others moving.
    for (let k = 0; k < 3; k++) {
      const meta: SnapshotMeta = {
        id: SnapshotId(`s${i}-${k}`),
        jobId: job.id,
        takenAt: T0 + 60_000 * (k + 1) + i,
        durationMicros: 1000,
        createdBy: 'admin',
        bytes: 2,
        storedBytes: body.length,
        ranks: RANKS,
        ok: RANKS,
        errors: 0,
        missing: 0,
        missingRanks: [],
        pendingSends: 0,
        pendingReceives: hungIndex === null ? k : 4,
        unexpected: 0,
        digest: hungIndex === null ? `d${i}-${k}` : `h${i}`,
      };
      await store.insertSnapshot(
        { meta, gz: body },
        { who: 'admin', action: 'snapshot', jobId: job.id, snapshotId: meta.id },
      );
    }
    const id = `${job.uid}:starter:${host}:${job.starterPid}:${i}`;
    await store.upsertWatchJob({
      id,
      key: `starter:${host}:${job.starterPid}:${i}`,
      uid: job.uid,
      jobId: job.id,
      info: {
        kind: 'starter',
        slurmJob: null,
        program: program(i, hungIndex),
        command: job.command,
        partition: 'batch',
        account: null,
        nodes: [host],
        rankCount: RANKS,
        startedAt: T0 + i,
      },
      at: T0 + i,
    });
    const state = hungIndex === null ? (i % 2 === 0 ? 'computing' : 'progressing') : 'hung';
    await store.insertWatchSample(
      {
        watchId: id,
        at: T0 + 120_000 + i,
        state,
        digest: null,
        ranksRead: RANKS,
        cpu: { ticks: 0, running: 0, switches: 0 },
        stopMicros: 0,
        snapshotId: null,
      },
      {
        state,
        since: T0 + 60_000 + i,
        confidence: 'high',
        leastProgressed: '',
        diagnosis: hungIndex === null ? 'messages moved' : 'Deadlock: ranks 0-3 wait in MPI_Recv',
        evidenceSnapshotId: null,
      },
    );
    if (ended) await store.endWatchJob(id, T0 + 1_800_000, null);
  }
  await (store as unknown as { close(): Promise<void> }).close();
}

type Done = (arg: [string, string | number]) => boolean;

/** ms from navigation until `done` holds in the page. */
async function timed(page: Page, url: string, done: Done, arg: [string, string | number]): Promise<number> {
  const t = Date.now();
  await page.goto(url);
  await page.waitForFunction(done, arg, { timeout: 120_000, polling: 16 });
  return Date.now() - t;
}

// Functions, not strings: the dashboard's Content-Security-Policy forbids eval.
const HUNG_FIRST: Done = ([sel, n]) => {
  const rows = Array.from(document.querySelectorAll(sel));
  return (
    rows.length >= Number(n) && rows.slice(0, Number(n)).every((r) => r.getAttribute('data-state') === 'hung')
  );
};
const ONE_ROW: Done = ([sel, text]) => {
  const rows = Array.from(document.querySelectorAll(sel));
  return rows.length === 1 && (rows[0]?.textContent ?? '').includes(String(text));
};

async function measure(s: Scale, browser: import('playwright-core').Browser) {
  const dir = mkdtempSync(join(tmpdir(), 'mqd-triage-'));
  try {
    const t = Date.now();
    await seed(dir, s);
    const seedMs = Date.now() - t;
    const cfg = loadConfig({
      env: {},
      argv: ['--fleet-rate-limit-max', '100000', '--rate-limit-max', '100000'],
      overrides: {
        port: 0,
        host: '127.0.0.1',
        dataDir: dir,
        adminToken: ADMIN,
        webRoot: resolve('apps/web/dist'),
      },
    });
    if (!cfg.ok) throw new Error(cfg.error.message);
    const served = await serve({ config: cfg.value, print: () => {}, logger: false });
    try {
      // The API alone (what the views wait for first), timed from here.
      const api = async (path: string) => {
        const t0 = Date.now();
        const r = await fetch(`${served.url}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } });
        const bytes = (await r.arrayBuffer()).byteLength;
        if (!r.ok) throw new Error(`${path}: ${r.status}`);
        return { ms: Date.now() - t0, bytes };
      };
      // The whole list (the answer without a page), and the first page the Jobs view asks for.
      const apiJobs = await api('/api/jobs');
      const apiJobsPage = await api('/api/jobs?endedLimit=100');
      const apiJobsSearch = await api(`/api/jobs?endedLimit=100&q=stuck${Math.floor(s.hung / 2)}`);
      const apiFleet = await api('/api/fleet');
      const apiFleetSearch = await api(`/api/fleet?q=stuck${Math.floor(s.hung / 2)}`);
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
      await page.goto(served.loginUrl);
      await page.waitForFunction(() => document.body.dataset['mqdIdle'] === 'true', undefined, {
        timeout: 60_000,
      });
      const target = `stuck${Math.floor(s.hung / 2)}`;
      const jobsMs = await timed(page, `${served.url}/?view=jobs`, HUNG_FIRST, [
        '[data-testid="job-row"]',
        s.hung,
      ]);
      const jobsSearchMs = await timed(page, `${served.url}/?view=jobs&jq=${target}`, ONE_ROW, [
        '[data-testid="job-row"]',
        target,
      ]);
      const fleetMs = await timed(page, `${served.url}/?view=fleet`, HUNG_FIRST, [
        '[data-testid="fleet-job-row"]',
        s.hung,
      ]);
      const fleetSearchMs = await timed(page, `${served.url}/?view=fleet&jq=${target}`, ONE_ROW, [
        '[data-testid="fleet-job-row"]',
        target,
      ]);
      await page.close();
      return {
        ...s,
        seedMs,
        jobsMs,
        jobsSearchMs,
        fleetMs,
        fleetSearchMs,
        apiJobsMs: apiJobs.ms,
        apiJobsBytes: apiJobs.bytes,
        apiJobsPageMs: apiJobsPage.ms,
        apiJobsPageBytes: apiJobsPage.bytes,
        apiJobsSearchMs: apiJobsSearch.ms,
        apiFleetMs: apiFleet.ms,
        apiFleetSearchMs: apiFleetSearch.ms,
      };
    } finally {
      await served.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
});
try {
  const base = await measure({ jobs: 100, hung: 2, ended: 90 }, browser);
  console.log(`triage baseline: ${JSON.stringify(base)}`);
  const big = await measure({ jobs: 10_000, hung: 20, ended: 9_000 }, browser);
  console.log(`triage 10,000 jobs: ${JSON.stringify(big)}`);
  const ratio = (a: number, b: number) => Math.round((a / Math.max(1, b)) * 100) / 100;
  const ratios = {
    jobs: ratio(big.jobsMs, base.jobsMs),
    jobsSearch: ratio(big.jobsSearchMs, base.jobsSearchMs),
    fleet: ratio(big.fleetMs, base.fleetMs),
    fleetSearch: ratio(big.fleetSearchMs, base.fleetSearchMs),
  };
  const pass = [big.jobsMs, big.jobsSearchMs, big.fleetMs, big.fleetSearchMs].every((x) => x < TARGET_MS);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/triage.json',
    `${JSON.stringify({ bench: 'triage at cluster scale', date: new Date().toISOString(), targets: { drawMs: TARGET_MS }, pass, baseline: base, rows: [big], ratiosToBaseline: ratios }, null, 2)}\n`,
  );
  console.log(
    `triage: 10,000 jobs ${JSON.stringify(ratios)} x the 100-job baseline (target < ${TARGET_MS} ms): ${pass ? 'ok' : 'MISSED'}`,
  );
  if (!pass) process.exitCode = 1;
} finally {
  await browser.close();
}
