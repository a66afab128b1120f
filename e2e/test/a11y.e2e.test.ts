// Accessibility of every view on a real hung MPI job: axe-core (@axe-core/playwright, WCAG 2.1
// A and AA rules) must find no serious or critical violation in the jobs, matrix, timeline,
// matching-order, rank, stacks and fleet views, and the matrix must work from the keyboard
// (arrow keys move a focused cell the status line announces; Enter lists its operations).
// Every view's screenshot goes to e2e/artifacts/after-<view>.png, the violations of every impact
// to a11y-violations.json beside them.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { ARTIFACTS, idle, screenshot } from './browser.js';
import { attach, e2eRig } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-tests-0123456789' });

/** Waits on a machine whose cores other test runs share (load 20+ on 2 cores happens). */
const SLOW = 120_000;

const VIEWS = ['jobs', 'matrix', 'timeline', 'order', 'rank', 'stacks', 'fleet'] as const;
/** The element each view shows once it is drawn. */
const READY: Record<(typeof VIEWS)[number], string> = {
  jobs: 'jobs-table',
  matrix: 'matrix-canvas',
  timeline: 'timeline-canvas',
  order: 'order-row',
  rank: 'rank-facts',
  stacks: 'stacks-tree',
  fleet: 'fleet-agents',
};

/**
 * rig.takeSnapshot with room for a loaded machine: the snapshot stops and reads every rank, which
 * takes longer than a locator's default 30 s when the cores are shared with other test runs.
 */
async function takeSnapshot(page: Page): Promise<void> {
  await page.getByTestId('take-snapshot').first().click();
  await page.getByTestId('matrix-canvas').or(page.getByTestId('error')).first().waitFor({ timeout: 180_000 });
  const error = page.getByTestId('error');
  if (await error.isVisible()) throw new Error(`snapshot failed: ${await error.first().innerText()}`);
  await idle(page, SLOW);
}

interface Found {
  readonly view: string;
  readonly id: string;
  readonly impact: string | null;
  readonly help: string;
  readonly targets: string[];
}

async function audit(page: Page, view: string): Promise<Found[]> {
  const r = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
  return r.violations.map((v) => ({
    view,
    id: v.id,
    impact: v.impact ?? null,
    help: v.help,
    targets: v.nodes.slice(0, 5).map((n) => n.target.join(' ')),
  }));
}

describe('accessibility', () => {
  it('every view of a hung wrong_tag job (Open MPI) passes axe-core with no serious or critical violation; the matrix works from the keyboard', async () => {
    const job = await rig.launch({ mpi: 'openmpi', fixture: 'wrong_tag', np: 4 });
    const local = await rig.serveLocal();
    const { page, errors } = await rig.openPage(local.served.loginUrl);
    // Attach takes the first snapshot (and the rig returns to the jobs view); a second one, so
    // the jobs view has a history and the timeline two points.
    await attach(page, { starterPid: job.starterPid }, 'a11y');
    await takeSnapshot(page);

    const base = new URL(page.url());
    const found: Found[] = [];
    for (const view of VIEWS) {
      const u = new URL(base);
      u.searchParams.set('view', view);
      if (view === 'order' || view === 'rank') u.searchParams.set('rank', '0');
      await page.goto(u.toString());
      await idle(page, SLOW);
      await page.getByTestId(READY[view]).first().waitFor({ timeout: SLOW });
      await idle(page, SLOW);
      await screenshot(page, `after-${view}`);
      found.push(...(await audit(page, view)));
    }
    writeFileSync(join(ARTIFACTS, 'a11y-violations.json'), `${JSON.stringify(found, null, 2)}\n`);
    // The jobs view says what the diagnosis says, and names the program, not the starter.
    const u = new URL(base);
    u.searchParams.set('view', 'jobs');
    await page.goto(u.toString());
    await idle(page, SLOW);
    const row = page.getByTestId('job-row').first();
    expect(await row.getByTestId('job-program').innerText()).toBe('wrong_tag');
    // Two equal snapshots: waiting (hung takes three), the diagnosis line says the deadlock.
    expect(await row.getByTestId('job-verdict').getAttribute('data-verdict')).toBe('waiting');
    expect(await row.getByTestId('job-diagnosis').innerText()).toMatch(/^Deadlock: /);
    expect(await row.getByTestId('job-history').locator('[data-read]').count()).toBe(2);

    // The matrix from the keyboard: focus, move right, Enter selects that cell.
    u.searchParams.set('view', 'matrix');
    await page.goto(u.toString());
    await idle(page, SLOW);
    // One MPI_COMM_SELF entry at most, however many ranks have one.
    const self = await page
      .getByLabel('Communicator')
      .locator('option', { hasText: 'MPI_COMM_SELF' })
      .count();
    expect(self).toBeLessThanOrEqual(1);
    const canvas = page.getByTestId('matrix-canvas');
    await canvas.focus();
    await page.keyboard.press('ArrowRight');
    await idle(page, SLOW);
    const status = page.getByTestId('matrix-focus');
    expect(await status.innerText()).toContain('sender 0 → receiver 1');
    await page.keyboard.press('ArrowDown');
    await page.keyboard.press('ArrowLeft');
    await idle(page, SLOW);
    expect(await status.innerText()).toContain('sender 1 → receiver 0');
    await page.keyboard.press('Enter');
    await idle(page, SLOW);
    expect(new URL(page.url()).searchParams.get('cell')).toBe('1,0,1');
    // Rank 1 posted a receive from rank 0 (tag 1): the cell lists it.
    await expect.poll(() => page.getByTestId('cell-op-row').count()).toBeGreaterThan(0);
    await screenshot(page, 'after-matrix-keyboard');
    expect(errors).toEqual([]);
    // Last, so the checks above run whatever axe found.
    const serious = found.filter((f) => f.impact === 'serious' || f.impact === 'critical');
    expect(
      serious.map((f) => `${f.view}: ${f.id} (${f.impact}) ${f.help} at ${f.targets.join(', ')}`),
    ).toEqual([]);
  }, 900_000); // seven views, two snapshots and axe on each, on a machine that may be shared
});
