// The Values view in Debian's chromium against the real aggregator, its real agent and the real
// reader, on a real hung job: values_behind (fixtures/mpi/values_behind.c) leaves its last rank
// one iteration behind. An expression typed into the view ("Take snapshot with values") is read
// on every rank in the new snapshot's stop, aggregated by the server, and the page says which
// rank differs and what the others read; the rank is a link to its detail; the expressions stay
// in the URL. Every wait is on a condition.
import { describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-values-tests-0123456789' });

describe('Values view on a real hung job', () => {
  it('openmpi values_behind: the rank one iteration behind, in words, linked to its detail', async () => {
    const job = await rig.launch({ mpi: 'openmpi', fixture: 'values_behind', np: 4 });
    const s = (await rig.serveLocal()).served;
    const { page, errors } = await rig.openPage(s.loginUrl);
    await attach(page, { starterPid: job.starterPid }, 'values-behind');
    await takeSnapshot(page);
    await page.keyboard.press('e');
    await page.getByTestId('values-view').waitFor();
    await idle(page);
    // The attach's snapshot read no expressions.
    expect(await page.getByTestId('values-none').innerText()).toContain('This snapshot read no expressions.');

    // A global, and a local of solve() in its frame.
    await page.getByTestId('values-expr').fill('step_counter');
    await page.getByRole('button', { name: 'Add' }).click();
    await page.getByTestId('values-expr').fill('iter');
    await page.getByTestId('values-frame').fill('solve');
    await page.getByTestId('values-take').click();
    const step = page.locator('[data-testid="value-card"][data-expr="step_counter"]');
    const iter = page.locator('[data-testid="value-card"][data-expr="iter"]');
    await step.getByTestId('value-outliers').waitFor({ timeout: 120_000 });
    await idle(page);
    expect(await step.getByTestId('value-outliers').innerText()).toBe('rank 3: 4 (the others: 5)');
    expect(await iter.getByTestId('value-outliers').innerText()).toBe('rank 3: 4 (the others: 5)');
    expect(await iter.innerText()).toContain('iter in solve');
    expect(await step.getByTestId('value-groups').innerText()).toContain('ranks 0-2: 5');
    expect(await step.innerText()).toContain('min 4 (rank 3), max 5 (ranks 0-2)');
    await step.getByTestId('value-spark').waitFor();
    // The expressions are in the URL, so a share link keeps them.
    const search = new URL(page.url()).searchParams;
    expect(search.getAll('ev')).toEqual(['step_counter', 'iter@solve']);
    expect(search.get('view')).toBe('values');
    await screenshot(page, 'values-behind');

    // The rank is a link to its rank detail.
    await step.getByTestId('value-outliers').getByRole('link').click();
    await idle(page);
    expect(await page.getByTestId('view-heading').innerText()).toBe('Rank');
    expect(new URL(page.url()).searchParams.get('rank')).toBe('3');
    expect(errors).toEqual([]);
  });
});
