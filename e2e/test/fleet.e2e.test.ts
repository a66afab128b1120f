// The Fleet view in Debian's chromium against the real aggregator with the
// hang watch on and a short period, and real jobs that nobody attaches: a wrong_tag job (ranks 0
// and 1 wait for each other), compute_loop (every rank computes outside MPI) and slow_bcast (rank
// 0 sleeps a second, then broadcasts: slow, not hung). The watcher discovers them, samples them
// every 2 s and the view, reloaded by `fleet.changed`, shows wrong_tag hung with its
// least-progressed ranks and diagnosis, compute_loop computing, slow_bcast never hung; one click
// on the hung job opens the snapshot behind the verdict with the diagnosis. And an admin changes
// the policy in the view's form. Every wait is on a condition, none on time.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { loadConfig, type ServerConfig } from '@mqd/server';
import { FIXTURES_DIR, MPI_NAMES } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot, WEB_ROOT } from './browser.js';
import { e2eRig } from './rig.js';

const ADMIN_TOKEN = 'admin-token-for-the-e2e-fleet-tests-0123456789abcdef';
const rig = e2eRig({ adminToken: ADMIN_TOKEN });

/** Discovery, two samples 2 s apart and the reload: well under this on an idle machine. */
const VERDICT_TIMEOUT_MS = 120_000;

/**
 * The e2e aggregator (browser.ts e2eServerConfig) with the hang watch on, sampling every 2 s
 * only the programs under `programs` (this checkout's fixtures: other MPI jobs on the machine
 * are not the test's).
 */
function watchConfig(programs: string): ServerConfig {
  const cfg = loadConfig({
    env: {},
    argv: [
      ...['--watch', 'on', '--watch-period', '2', '--watch-hung-after', '2', '--watch-stop-budget', '60000'],
      ...['--watch-programs', programs],
    ],
    overrides: {
      port: 0,
      host: '127.0.0.1',
      dataDir: ':memory:',
      adminToken: ADMIN_TOKEN,
      webRoot: WEB_ROOT,
    },
  });
  if (!cfg.ok) throw new Error(cfg.error.message);
  return cfg.value;
}

const SOURCE = readFileSync(join(FIXTURES_DIR, 'wrong_tag.c'), 'utf8').split('\n');
/** 1-based line of wrong_tag.c where rank 0 receives tag 99 from rank 1 (read, never written here). */
const LINE_99 = SOURCE.findIndex((l) => /MPI_Recv\(buf, 4, MPI_INT, 1, 99,/.test(l)) + 1;

/**
 * The selector of the row of the job whose starter is `starterPid` (its key is
 * starter:HOST:PID:STARTTIME): other test runs' jobs on this node are listed too.
 */
const rowSelector = (starterPid: number) => `[data-testid="fleet-job-row"][data-key*=":${starterPid}:"]`;

/**
 * Waits until the row of `starterPid`'s job is in `state`; on a timeout, a screenshot of what
 * the view showed instead (`${name}.png`) and the rows' text in the error.
 */
async function waitForState(page: Page, starterPid: number, state: string, name: string): Promise<void> {
  try {
    await page
      .locator(`${rowSelector(starterPid)}[data-state="${state}"]`)
      .waitFor({ timeout: VERDICT_TIMEOUT_MS });
  } catch (e) {
    await screenshot(page, name);
    const rows = await page.getByTestId('fleet-job-row').allInnerTexts();
    throw new Error(`job ${starterPid} never showed as ${state}; the rows: ${JSON.stringify(rows)}`, {
      cause: e,
    });
  }
}

// One build: the Fleet view draws the watch's verdicts the same for any MPI. The
// watch's verdicts on real MPICH jobs (a deadlock, compute_loop, slow_bcast) are
// apps/cli/test/watch-slurm.mpi.test.ts's, so Open MPI here keeps both families under the watch.
describe.each(MPI_NAMES.slice(0, 1))('%s: the Fleet view finds a hung job nobody attached', (mpi) => {
  it('shows wrong_tag hung, compute_loop computing and slow_bcast not hung, in words; one click opens the hang', async () => {
    const hung = await rig.launch({ mpi, fixture: 'wrong_tag', np: 4 });
    const computing = await rig.launch({ mpi, fixture: 'compute_loop', np: 2, waitFor: 'ready' });
    const slow = await rig.launch({
      mpi,
      fixture: 'slow_bcast',
      np: 2,
      waitFor: 'ready',
      env: { MQD_SLOW_MS: '1000' },
    });
    const fixtures = `${dirname(hung.binary)}/`;
    const local = await rig.serveLocal(watchConfig(fixtures));
    const { page, errors } = await rig.openPage(local.served.loginUrl);

    // Reached from the header, next to Jobs; the URL says which view.
    await page
      .getByRole('navigation', { name: 'Views' })
      .getByRole('button', { name: /^Fleet/ })
      .click();
    await page.getByTestId('fleet-jobs').waitFor();
    expect(new URL(page.url()).searchParams.get('view')).toBe('fleet');
    expect((await page.getByTestId('fleet-scope').innerText()).trim()).toBe(
      'Every MPI job the agents found, whoever runs it (you are an admin).',
    );
    expect((await page.getByTestId('fleet-policy-summary').innerText()).trim()).toBe(
      `The hang watch samples only jobs of program ${fixtures} every 2 s; a job blocked in MPI with nothing moving over 2 samples ` +
        'is called hung; each rank is stopped at most 60,000 ms per hour.',
    );

    // No attach, no click: the watch's verdicts arrive by themselves.
    const wrongTag = page.locator(rowSelector(hung.starterPid));
    const compute = page.locator(rowSelector(computing.starterPid));
    await waitForState(page, hung.starterPid, 'hung', `${mpi}-fleet-not-hung`);
    await waitForState(page, computing.starterPid, 'computing', `${mpi}-fleet-not-computing`);
    await page
      .locator(`${rowSelector(slow.starterPid)}:is([data-state="waiting"], [data-state="progressing"])`)
      .waitFor({ timeout: VERDICT_TIMEOUT_MS });
    await idle(page);
    await screenshot(page, `${mpi}-fleet-hung`);

    // What a person reads on the hung job's row: the program the starter runs, not the starter.
    expect(await wrongTag.getByTestId('fleet-job-program').innerText()).toBe('wrong_tag');
    expect(await wrongTag.innerText()).toContain(`pid ${hung.starterPid} on `);
    expect(await wrongTag.getByTestId('fleet-job-watch').innerText()).toBe('watched');
    expect(await wrongTag.getByTestId('fleet-job-state').innerText()).toMatch(
      /^hung since \d\d:\d\d( [AP]M)? \(high confidence\)$/,
    );
    // 0 and 1 wait for each other, 2 and 3 behind them for rank 0: the cycle is least progressed.
    expect(await wrongTag.getByTestId('fleet-job-least').innerText()).toBe('least progressed: ranks 0-1');
    expect(await wrongTag.getByTestId('fleet-job-diagnosis').innerText()).toBe(
      `Deadlock: rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:${LINE_99} in main`,
    );
    expect(await wrongTag.innerText()).toContain(`4 ranks on`);
    // Its history ends hung, and says so in words for screen readers.
    const states =
      (await wrongTag.getByTestId('fleet-history').getAttribute('data-states'))?.split(',') ?? [];
    expect(states.at(-1)).toBe('hung');
    expect(await wrongTag.getByTestId('fleet-history-text').textContent()).toMatch(
      /^last \d+ samples: .* hung$/,
    );
    // The computing job is watched too, never called hung, and has nobody to blame.
    expect(await compute.getByTestId('fleet-job-program').innerText()).toBe('compute_loop');
    expect(await compute.getByTestId('fleet-job-watch').innerText()).toBe('watched');
    expect(await compute.getByTestId('fleet-job-state').innerText()).toBe('computing');
    expect(await compute.getByTestId('fleet-job-least').count()).toBe(0);
    // The slow job: sampled as often as the others, waiting or progressing, never hung.
    const slowRow = page.locator(rowSelector(slow.starterPid));
    expect(await slowRow.getByTestId('fleet-job-program').innerText()).toBe('slow_bcast');
    expect(await slowRow.getByTestId('fleet-job-state').innerText()).toMatch(/^(waiting|progressing)$/);
    expect(
      (await slowRow.getByTestId('fleet-history').getAttribute('data-states'))?.split(',') ?? [],
    ).not.toContain('hung');
    // Hung first: the hung job's row comes before the computing one's.
    const keys = await page
      .getByTestId('fleet-job-row')
      .evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset['key'] ?? ''));
    const at = (pid: number) => keys.findIndex((k) => k.includes(`:${pid}:`));
    expect(at(hung.starterPid)).toBeGreaterThanOrEqual(0);
    expect(at(hung.starterPid)).toBeLessThan(at(computing.starterPid));
    // The table, chips, history and policy form pass axe-core (WCAG 2.1 A and AA) with no
    // serious or critical violation.
    const axe = await new AxeBuilder({ page })
      .withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'])
      .analyze();
    const bad = axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    expect(bad.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)).toEqual([]);

    // One click on the job: the snapshot behind the verdict, diagnosis first.
    await wrongTag.getByTestId('fleet-job-program').click();
    const cycle = page.getByTestId('diagnosis-cycle');
    await cycle.waitFor();
    await idle(page);
    const url = new URL(page.url());
    expect(url.searchParams.get('view')).toBe('matrix');
    expect(url.searchParams.get('snap')).not.toBeNull();
    expect((await cycle.innerText()).trim()).toMatch(
      new RegExp(`^Cycle: rank 0 waits for rank 1 \\(tag 99, wrong_tag\\.c:${LINE_99}\\)`),
    );
    expect((await page.getByTestId('diagnosis-line').first().innerText()).trim()).toBe(
      `Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:${LINE_99} in main`,
    );
    await screenshot(page, `${mpi}-fleet-hung-snapshot`);
    // The watch never leaves a rank stopped: the job is still there, its ranks still alive.
    expect(hung.exitStatus()).toBeUndefined();
    expect(errors).toEqual([]);
  });
});

describe('the watch policy in the Fleet view', () => {
  it('an admin turns the watch on for two users; a period of 0 is refused in words first', async () => {
    const local = await rig.serveLocal();
    const { page, errors } = await rig.openPage(local.served.loginUrl);
    await page.keyboard.press('f');
    await page.getByTestId('fleet-policy-form').waitFor();
    await idle(page);
    expect((await page.getByTestId('fleet-policy-summary').innerText()).trim()).toBe(
      'The hang watch is off: no job is sampled.',
    );

    // Refused by the form, nothing sent: the field says why.
    await page.getByTestId('fleet-policy-periodSeconds').fill('0');
    await page.getByTestId('fleet-policy-save').click();
    const error = page.getByTestId('fleet-policy-error');
    await error.waitFor();
    expect(await error.innerText()).toBe('The sample period must be from 1 to 86,400 s; 0 is not.');
    expect(await page.getByTestId('fleet-policy-periodSeconds').getAttribute('aria-invalid')).toBe('true');

    await page.getByTestId('fleet-policy-enabled').check();
    await page.getByTestId('fleet-policy-periodSeconds').fill('5');
    await page.getByTestId('fleet-policy-users').fill('alice, bob');
    await page.getByTestId('fleet-policy-save').click();
    await page.getByTestId('fleet-policy-saved').waitFor();
    await idle(page);
    const said =
      'The hang watch samples only jobs of users alice, bob every 5 s; a job blocked in MPI with nothing ' +
      'moving over 3 samples is called hung; each rank is stopped at most 1,000 ms per hour.';
    expect((await page.getByTestId('fleet-policy-saved').innerText()).trim()).toBe(`Saved. ${said}`);
    // Reloaded from the server: the summary and the form show what it now applies.
    expect((await page.getByTestId('fleet-policy-summary').innerText()).trim()).toBe(said);
    expect(await page.getByTestId('fleet-policy-users').inputValue()).toBe('alice, bob');
    expect(await page.getByTestId('fleet-policy-error').count()).toBe(0);
    expect(errors).toEqual([]);
  });
});
