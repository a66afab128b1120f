// Share links keep the picture: a link made from a filtered Stacks view of a real
// hung job (function search, all threads, a selected node) opens that view in a fresh browser
// context (no session: the share is all it has), read-only, with the same filter text and the
// same selected frame and ranks. Every wait is on a condition.
import { MPI_NAMES } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-share-tests-0123456789' });

/** What a person reads in the Stacks view: the search box, the threads choice, the selected frame. */
async function stacksPicture(page: Page) {
  const selected = page.getByTestId('stack-selected');
  await selected.waitFor();
  return {
    search: await page.getByTestId('stacks-search').inputValue(),
    allThreads: await page.getByRole('button', { name: 'All threads' }).getAttribute('aria-pressed'),
    selectedFunction: await selected.locator('h3').textContent(),
    selectedRanks: await selected.getAttribute('data-ranks'),
    selectedText: (await selected.innerText()).replace(/\s+/g, ' ').trim(),
    tab: await page.locator('nav.tabs [aria-current="page"]').textContent(),
  };
}

describe.each(MPI_NAMES.slice(0, 1))('a share link of a %s job', (mpi) => {
  it('made from a filtered Stacks view opens the same view in a fresh context', async () => {
    const job = await rig.launch({ mpi, fixture: 'collective_mismatch', np: 4 });
    const { served } = await rig.serveLocal();
    const { page, errors } = await rig.openPage(served.loginUrl);
    await attach(page, { starterPid: job.starterPid }, `${mpi}-share`);
    await takeSnapshot(page).catch(async (e: unknown) => {
      await screenshot(page, `${mpi}-share-snapshot-failed`);
      throw e;
    });

    // The picture: the Stacks view, every thread, functions matching "barrier", the barrier frame selected.
    await page.keyboard.press('s');
    await page.getByTestId('stacks-tree').waitFor();
    await page.getByRole('button', { name: 'All threads' }).click();
    await page.getByTestId('stacks-search').fill('barrier');
    await idle(page);
    // The barrier's row (MPI_Barrier, or its profiling name PMPI_Barrier); a click selects it.
    const barrier = page.locator('[data-testid="stack-node"][data-function*="Barrier"]').first();
    await barrier.waitFor();
    await barrier.locator('.fn').first().click();
    await idle(page);
    const made = await stacksPicture(page);
    expect(made.search).toBe('barrier');
    expect(made.allThreads).toBe('true');
    expect(made.selectedFunction ?? '').toMatch(/barrier/i);
    expect(made.selectedRanks).toBe('0-2');
    await screenshot(page, `${mpi}-share-made-from`);

    await page.getByTestId('share-button').click();
    const linkBox = page.getByTestId('share-link').locator('input');
    await linkBox.waitFor();
    const link = await linkBox.inputValue();
    expect(new URL(link).pathname).toMatch(/^\/s\/[A-Za-z0-9_-]+$/);

    // A fresh context: no session cookie, only the link.
    const shared = await rig.openPage(link);
    await shared.page.getByTestId('read-only-banner').waitFor();
    await shared.page.getByTestId('stacks-tree').waitFor();
    await idle(shared.page);
    const opened = await stacksPicture(shared.page);
    await screenshot(shared.page, `${mpi}-share-opened`);
    expect(opened).toEqual(made);
    expect(await shared.page.locator('[data-testid="stack-node"].match').count()).toBeGreaterThan(0);
    expect(errors).toEqual([]);
    expect(shared.errors).toEqual([]);
  });
});
