// The Stacks view in Debian's chromium against the real aggregator. First on a job with stacks
// generated in the page (the demo source, served by the real server): the tree, search,
// selection, the jump to the matrix filtered to the selected ranks and to the rank detail with
// its threads, and the collective-mismatch diagnosis; the tree from the keyboard (WAI-ARIA tree
// pattern); the MPI runtime's threads hidden with their count. Then on real hung jobs (both
// MPIs): the collective_mismatch fixture's stacks must show ranks 0-2 in MPI_Barrier and rank 3
// in MPI_Recv; wrong_tag's two stacks with main's two lines (by function: one). Screenshots go
// to e2e/artifacts/. Every wait is on a condition.
import { AxeBuilder } from '@axe-core/playwright';
import type { Served } from '@mqd/server';
import { MPI_NAMES, type MpiName } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-stacks-tests-0123456789' });

async function serve(): Promise<Served> {
  return (await rig.serveLocal()).served;
}

/** A real hung job of `fixture` attached through the attach form and snapshotted, in the Stacks view. */
async function realJobStacks(mpi: MpiName, fixture: string, name: string) {
  const job = await rig.launch({ mpi, fixture, np: 4 });
  const s = await serve();
  const opened = await rig.openPage(s.loginUrl);
  await attach(opened.page, { starterPid: job.starterPid }, name);
  await takeSnapshot(opened.page);
  await opened.page.keyboard.press('s');
  await opened.page.getByTestId('stacks-tree').waitFor();
  return opened;
}

/** The row of an MPI function: the tree shows frames as they are, and the libraries' public
 * entry is often the profiling name (PMPI_Barrier in Open MPI 4.1 and MPICH 4.0), or MPICH 4.2's
 * binding frame (internal_Barrier). */
function node(page: Page, fn: string) {
  const names = fn.startsWith('MPI_') ? [fn, `P${fn}`, fn.replace(/^MPI_/, 'internal_')] : [fn];
  return page
    .locator(names.map((n) => `[data-testid="stack-node"][data-function="${n}"]`).join(', '))
    .first();
}

/** axe-core's serious and critical violations inside the Stacks view (its toolbar, tree and panel). */
async function axeSerious(page: Page): Promise<string[]> {
  const r = await new AxeBuilder({ page })
    .include('.stacks-layout')
    .withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'])
    .analyze();
  return r.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** The data-function of the focused element (a tree row). */
const focused = (page: Page) =>
  page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset['function'] ?? null);

describe('Stacks view', () => {
  it('a job with stacks: tree, search, selection, matrix of the selection, rank threads, diagnosis', async () => {
    const s = await serve();
    const base = new URL(s.loginUrl);
    const { page, errors } = await rig.openPage(
      `${base.origin}/?demo=64&scenario=stacks-mismatch&view=stacks`,
    );
    await page.getByTestId('stacks-tree').waitFor();
    await idle(page);
    await expect.poll(() => node(page, 'MPI_Barrier').getAttribute('data-ranks')).toBe('0-62');
    expect(await node(page, 'MPI_Allreduce').getAttribute('data-ranks')).toBe('63');
    // The straight chain _start › … › main › run_simulation › timestep_loop is one row of 64 ranks.
    const root = page.getByTestId('stack-node').first();
    expect(await root.getAttribute('data-count')).toBe('64');
    expect(await root.getAttribute('data-chain')).toBe('6');
    expect(await root.getAttribute('data-function')).toBe('timestep_loop');
    expect(await root.getAttribute('data-place')).toBe('step.c:105');
    // The MPI calls are folded: their library frames are not rows until opened.
    expect(await node(page, 'MPI_Barrier').getAttribute('aria-expanded')).toBe('false');
    expect(await page.locator('[data-testid="stack-node"][data-kind="mpi-inside"]').count()).toBe(0);
    expect(await page.getByTestId('stacks-summary').textContent()).toContain(
      '64 ranks, 2 distinct stacks (by line)',
    );
    const diagnosis = page.getByTestId('diagnosis');
    await expect.poll(async () => (await diagnosis.textContent()) ?? '').toMatch(/collective/i);
    await diagnosis.locator('summary').click();
    expect(await diagnosis.textContent()).toContain(
      'ranks 0-62 in MPI_Barrier on MPI_COMM_WORLD, rank 63 in MPI_Allreduce on MPI_COMM_WORLD',
    );
    await screenshot(page, 'stacks-demo-tree');

    // Search highlights the matching frames.
    await page.getByTestId('stacks-search').fill('allreduce');
    await idle(page);
    await expect.poll(() => page.locator('[data-testid="stack-node"].match').count()).toBeGreaterThan(0);
    for (const fn of await page
      .locator('[data-testid="stack-node"].match')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-function') ?? ''))) {
      expect(fn.toLowerCase()).toContain('allreduce');
    }
    await screenshot(page, 'stacks-demo-search');

    // Selecting a node selects its ranks; the matrix opens filtered to them.
    await node(page, 'MPI_Allreduce').click();
    await idle(page);
    const selected = page.getByTestId('stack-selected');
    expect(await selected.getAttribute('data-ranks')).toBe('63');
    await page.getByTestId('stack-to-matrix').click();
    await page.getByTestId('matrix-canvas').waitFor();
    await idle(page);
    expect(new URL(page.url()).searchParams.get('ranks')).toBe('63');
    expect(await page.getByTestId('matrix-rank-filter').textContent()).toContain('63');
    await screenshot(page, 'stacks-demo-matrix-filtered');

    // Back to the stacks (key s), then to the rank detail with its threads.
    await page.keyboard.press('s');
    await page.getByTestId('stack-selected').waitFor();
    await idle(page);
    await page.getByTestId('stack-to-rank').click();
    await page.getByTestId('rank-threads').waitFor();
    await idle(page);
    expect(await page.getByTestId('rank-mpi-call').textContent()).toContain('MPI_Allreduce');
    expect(await page.getByTestId('rank-thread').first().textContent()).toContain('MPI_Allreduce');
    await screenshot(page, 'stacks-demo-rank');
    expect(errors).toEqual([]);
  });

  it('the tree from the keyboard: one tab stop, arrows move, Right/Left open and fold, Enter selects', async () => {
    const s = await serve();
    const base = new URL(s.loginUrl);
    const { page, errors } = await rig.openPage(
      `${base.origin}/?demo=64&scenario=stacks-mismatch&view=stacks`,
    );
    await page.getByTestId('stacks-tree').waitFor();
    await idle(page);
    // Exactly one row is in the tab order; Tab from the search box lands on the tree.
    expect(await page.locator('[role="treeitem"][tabindex="0"]').count()).toBe(1);
    await page.getByRole('treeitem').first().focus();
    expect(await focused(page)).toBe('timestep_loop');
    expect(await page.getByRole('treeitem').first().getAttribute('aria-level')).toBe('1');
    await page.keyboard.press('ArrowDown');
    expect(await focused(page)).toBe('sync_all');
    await page.keyboard.press('ArrowDown');
    expect(await focused(page)).toBe('MPI_Barrier');
    const barrier = node(page, 'MPI_Barrier');
    expect(await barrier.getAttribute('aria-level')).toBe('3');
    expect(await barrier.getAttribute('tabindex')).toBe('0');
    // Right opens the folded MPI call, Right again enters it, Left goes back up, Left folds.
    await page.keyboard.press('ArrowRight');
    await idle(page);
    expect(await barrier.getAttribute('aria-expanded')).toBe('true');
    await page.keyboard.press('ArrowRight');
    expect(await page.evaluate(() => document.activeElement?.getAttribute('data-kind'))).toBe('mpi-inside');
    expect(await axeSerious(page)).toEqual([]);
    await page.keyboard.press('ArrowLeft');
    expect(await focused(page)).toBe('MPI_Barrier');
    await page.keyboard.press('ArrowLeft');
    await idle(page);
    expect(await barrier.getAttribute('aria-expanded')).toBe('false');
    // End and Home; Enter selects the focused row's ranks.
    await page.keyboard.press('End');
    expect(await focused(page)).toBe('MPI_Allreduce');
    await page.keyboard.press('Enter');
    await idle(page);
    expect(await page.getByTestId('stack-selected').getAttribute('data-ranks')).toBe('63');
    expect(new URL(page.url()).searchParams.get('ranks')).toBe('63');
    await page.keyboard.press('Home');
    expect(await focused(page)).toBe('timestep_loop');
    // The arrows never switched the view (the App's own keys are letters).
    expect(new URL(page.url()).searchParams.get('view')).toBe('stacks');
    await screenshot(page, 'stacks-demo-keyboard');
    expect(errors).toEqual([]);
  });

  it("all threads: the MPI runtime's progress threads hidden, counted, shown on request", async () => {
    const s = await serve();
    const base = new URL(s.loginUrl);
    const { page, errors } = await rig.openPage(`${base.origin}/?demo=64&scenario=stacks&view=stacks`);
    await page.getByTestId('stacks-tree').waitFor();
    await idle(page);
    await page.getByRole('button', { name: 'All threads' }).click();
    await idle(page);
    const note = page.getByTestId('stacks-runtime-threads');
    expect(await note.getAttribute('data-count')).toBe('8');
    expect(await note.getAttribute('data-hidden')).toBe('true');
    expect(await note.textContent()).toContain('8 MPI runtime threads hidden');
    expect(await page.locator('[data-testid="stack-node"][data-function="poll"]').count()).toBe(0);
    // Rank and thread counts per row.
    expect(await page.getByTestId('stack-node').first().getAttribute('data-threads')).toBe('64');
    await screenshot(page, 'stacks-demo-runtime-hidden');
    await note.getByRole('button', { name: 'Show them' }).click();
    await idle(page);
    expect(new URL(page.url()).searchParams.get('srt')).toBe('1');
    expect(await note.getAttribute('data-hidden')).toBe('false');
    expect(await page.locator('[data-testid="stack-node"][data-function="poll"]').count()).toBe(1);
    expect(await axeSerious(page)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('a snapshot without stacks says so', async () => {
    const s = await serve();
    const base = new URL(s.loginUrl);
    const { page, errors } = await rig.openPage(`${base.origin}/?demo=16&scenario=ring&view=stacks`);
    await page.getByTestId('stacks-empty').waitFor();
    expect(await page.getByTestId('stacks-empty').textContent()).toMatch(/no stacks/i);
    expect(errors).toEqual([]);
  });
});

describe.each(MPI_NAMES)('%s collective_mismatch job in the Stacks view', (mpi) => {
  it('shows ranks 0-2 in MPI_Barrier and rank 3 in MPI_Recv, and the diagnosis names both', async () => {
    const { page, errors } = await realJobStacks(mpi, 'collective_mismatch', `${mpi}-collective-mismatch`);
    await idle(page);
    await screenshot(page, `${mpi}-collective-mismatch-stacks`);
    await expect.poll(() => node(page, 'MPI_Barrier').getAttribute('data-ranks')).toBe('0-2');
    expect(await node(page, 'MPI_Recv').getAttribute('data-ranks')).toBe('3');
    const diagnosis = page.getByTestId('diagnosis');
    await expect.poll(async () => (await diagnosis.textContent()) ?? '').toMatch(/collective/i);
    const text = (await diagnosis.textContent()) ?? '';
    expect(text).toMatch(/ranks 0-2 in MPI_Barrier/);
    expect(text).toMatch(/rank 3 in MPI_Recv/);
    await page.keyboard.press('r');
    await page.getByTestId('rank-threads').waitFor();
    await idle(page);
    await screenshot(page, `${mpi}-collective-mismatch-rank`);
    expect(errors).toEqual([]);
  });
});

describe.each(MPI_NAMES)('%s wrong_tag job in the Stacks view', (mpi) => {
  it("shows two stacks with main's two lines; by function one", async () => {
    const { page, errors } = await realJobStacks(mpi, 'wrong_tag', `${mpi}-wrong-tag`);
    await idle(page);
    await screenshot(page, `${mpi}-wrong-tag-stacks`);
    const summary = page.getByTestId('stacks-summary');
    expect(await summary.textContent()).toContain('4 ranks, 2 distinct stacks (by line)');
    const mains = page.locator('[data-testid="stack-node"][data-function="main"]');
    expect(
      await mains.evaluateAll((els) =>
        els.map((e) => [e.getAttribute('data-place'), e.getAttribute('data-ranks')]),
      ),
    ).toEqual([
      ['wrong_tag.c:47', '1-3'],
      ['wrong_tag.c:36', '0'],
    ]);
    // What a person reads: the line beside the function, and each receive under its line.
    expect(await mains.first().textContent()).toContain('wrong_tag.c:47');
    expect(await node(page, 'MPI_Recv').getAttribute('aria-level')).toBe(
      String(Number(await mains.first().getAttribute('aria-level')) + 1),
    );
    const stacks = page.getByTestId('stack-classes');
    expect(await stacks.textContent()).toContain('main at wrong_tag.c:36');
    // Rank 0 stands apart, but 1 of 4 ranks is a quarter of the job: no outlier is named.
    expect(await page.getByTestId('stack-outliers').count()).toBe(0);
    // Merged by function: one stack, main for all four ranks.
    await page.getByTestId('stacks-by').getByRole('button', { name: 'By function' }).click();
    await idle(page);
    expect(new URL(page.url()).searchParams.get('sby')).toBe('function');
    expect(await summary.textContent()).toContain('4 ranks, 1 distinct stack (by function)');
    expect(await mains.evaluateAll((els) => els.map((e) => e.getAttribute('data-ranks')))).toEqual(['0-3']);
    // All threads: whatever threads the runtime runs for itself are hidden and counted, not shown.
    await page.getByRole('button', { name: 'All threads' }).click();
    await idle(page);
    const note = page.getByTestId('stacks-runtime-threads');
    if ((await note.count()) > 0) {
      expect(await note.getAttribute('data-hidden')).toBe('true');
      expect(Number(await note.getAttribute('data-count'))).toBeGreaterThan(0);
    }
    expect(await summary.textContent()).toMatch(/^4 ranks, 4 threads, /);
    await screenshot(page, `${mpi}-wrong-tag-stacks-all-threads`);
    expect(errors).toEqual([]);
  });
});
