// The Stacks view in Debian's chromium against the real aggregator. First on a job with stacks
// generated in the page (the demo source, served by the real server): the tree, search,
// selection, the jump to the matrix filtered to the selected ranks and to the rank detail with
// its threads, and the collective-mismatch diagnosis. Then on real hung jobs (both MPIs): the
// collective_mismatch fixture's stacks must show ranks 0-2 in MPI_Barrier and rank 3 in
// MPI_Recv. Screenshots go to e2e/artifacts/. Every wait is on a condition.
import type { Served } from '@mqd/server';
import { MPI_NAMES } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-stacks-tests-0123456789' });

async function serve(): Promise<Served> {
  return (await rig.serveLocal()).served;
}

/** The node of an MPI function: the tree shows frames as they are, and the libraries' public
 * entry is often the profiling name (PMPI_Barrier in Open MPI 4.1 and MPICH 4.0). */
function node(page: Page, fn: string) {
  const names = fn.startsWith('MPI_') ? [fn, `P${fn}`] : [fn];
  return page
    .locator(names.map((n) => `[data-testid="stack-node"][data-function="${n}"]`).join(', '))
    .first();
}

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
    expect(await node(page, 'main').getAttribute('data-count')).toBe('64');
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
    await node(page, 'MPI_Allreduce').locator('button.frame').click();
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
    const job = await rig.launch({ mpi, fixture: 'collective_mismatch', np: 4 });
    const s = await serve();
    const { page, errors } = await rig.openPage(s.loginUrl);
    await attach(page, { starterPid: job.starterPid }, `${mpi}-collective-mismatch`);
    await takeSnapshot(page);
    await page.keyboard.press('s');
    await page.getByTestId('stacks-tree').waitFor();
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
