// The diagnosis first, in Debian's chromium against the real aggregator and a
// real hung wrong_tag job: right after the snapshot (the page it lands on) the diagnosis is open
// and names rank 0's tag 99 and rank 1's tag 1 with the source lines of their receives; clicking
// a rank it names opens that rank with its frame selected. The expected lines are read from the
// fixture's source, never written here. Every wait is on a condition.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES_DIR, MPI_NAMES } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-diagnosis-tests-0123456789' });

const SOURCE = readFileSync(join(FIXTURES_DIR, 'wrong_tag.c'), 'utf8').split('\n');

/** 1-based line of the first source line of wrong_tag.c that matches. */
function sourceLine(re: RegExp): number {
  const i = SOURCE.findIndex((l) => re.test(l));
  if (i < 0) throw new Error(`wrong_tag.c has no line matching ${re}`);
  return i + 1;
}
// Rank 0 receives tag 99 from rank 1; every other rank receives tag 1 from rank 0.
const LINE_99 = sourceLine(/MPI_Recv\(buf, 4, MPI_INT, 1, 99,/);
const LINE_1 = sourceLine(/MPI_Recv\(buf, 4, MPI_INT, 0, 1,/);

/** Clicks the link to `rank` in the cycle line and waits for its detail with a frame selected. */
async function openRankFromCycle(page: Page, rank: number): Promise<string> {
  const link = page
    .getByTestId('diagnosis-cycle')
    .locator('a[data-link="rank"]', { hasText: new RegExp(`^rank ${rank}$`) })
    .first();
  await link.click();
  const selected = page.getByTestId('rank-frame-selected');
  await selected.waitFor();
  await idle(page);
  expect(new URL(page.url()).searchParams.get('rank')).toBe(String(rank));
  return selected.innerText();
}

describe.each(MPI_NAMES)('%s wrong_tag: the diagnosis first', (mpi) => {
  it('open, names tag 99 and tag 1 with their source lines; each rank opens at its frame', async () => {
    const job = await rig.launch({ mpi, fixture: 'wrong_tag', np: 4 });
    const local = await rig.serveLocal();
    const { page, errors } = await rig.openPage(local.served.loginUrl);
    await attach(page, { starterPid: job.starterPid }, `${mpi}-wrong-tag-diagnosis`);
    // One click from the landing page (the jobs list): the snapshot opens in the matrix.
    await takeSnapshot(page);
    const diagnosis = page.getByTestId('diagnosis');
    const cycle = page.getByTestId('diagnosis-cycle');
    await cycle.waitFor();
    expect(await diagnosis.getAttribute('open')).not.toBeNull();
    expect(await cycle.isVisible()).toBe(true);
    expect((await cycle.innerText()).trim()).toBe(
      `Cycle: rank 0 waits for rank 1 (tag 99, wrong_tag.c:${LINE_99}) / rank 1 waits for rank 0 (tag 1, :${LINE_1})`,
    );
    const lines = await page.getByTestId('diagnosis-line').allInnerTexts();
    expect(lines.map((l) => l.trim())).toEqual([
      `Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:${LINE_99} in main`,
      `Ranks 1-3 wait in MPI_Recv for a message from rank 0, tag 1, on MPI_COMM_WORLD, at wrong_tag.c:${LINE_1} in main`,
    ]);
    await screenshot(page, `${mpi}-wrong-tag-diagnosis`);

    // Second click: rank 0's detail, its frame in main at the receive of tag 99 selected.
    const row0 = await openRankFromCycle(page, 0);
    expect(row0).toMatch(/\bmain\b/);
    expect(row0).toContain(`wrong_tag.c:${LINE_99}`);
    // The detail leads with rank 0's sentence and the source around its line, read by the
    // reader as the job's owner: the line's own text, highlighted.
    expect((await page.getByTestId('rank-sentence').innerText()).trim()).toBe(
      `Rank 0 waits in MPI_Recv for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.c:${LINE_99} in main`,
    );
    const current = page.getByTestId('rank-source').getByTestId('rank-source-line');
    expect(await current.getAttribute('data-line')).toBe(String(LINE_99));
    expect(await current.innerText()).toContain(SOURCE[LINE_99 - 1]?.trim() ?? '?');
    await screenshot(page, `${mpi}-wrong-tag-rank0-frame`);

    // Back to the diagnosis, then rank 1: the receive of tag 1.
    await page.goBack();
    await cycle.waitFor();
    const row1 = await openRankFromCycle(page, 1);
    expect(row1).toContain(`wrong_tag.c:${LINE_1}`);
    expect(await page.getByTestId('rank-source-line').innerText()).toContain(
      SOURCE[LINE_1 - 1]?.trim() ?? '?',
    );

    // The group's source line is a link too: rank 1's frame (ranks 2 and 3 wait at the same line).
    await page.goBack();
    await cycle.waitFor();
    await page
      .getByTestId('diagnosis-line')
      .filter({ hasText: /^Ranks 1-3/ })
      .locator('a[data-link="frame"]')
      .click();
    const row = page.getByTestId('rank-frame-selected');
    await row.waitFor();
    expect(await row.innerText()).toContain(`wrong_tag.c:${LINE_1}`);
    expect(errors).toEqual([]);
  });
});
