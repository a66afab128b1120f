// The dashboard in Debian's chromium against the real aggregator (with its local agent: the
// real MPI reader and MPIR locator) and real hung Open MPI and MPICH jobs. Screenshots of each
// view go to e2e/artifacts/. Every wait is on a condition (the app's idle signal, an element).
import type { Served } from '@mqd/server';
import { MPI_NAMES } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot, type Watched } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const STRIP = 14; // apps/web/src/matrix/renderer.ts: the ANY/unknown strips beside the matrix
const STRIP_GAP = 6;

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-tests-0123456789' });

async function start(mpi: 'openmpi' | 'mpich', fixture: string): Promise<{ s: Served; starterPid: number }> {
  const job = await rig.launch({ mpi, fixture, np: 4 });
  const local = await rig.serveLocal();
  return { s: local.served, starterPid: job.starterPid };
}

/** Logs in through the URL the server prints, attaches the job by pid and takes a snapshot, all in the UI. */
async function attachAndSnapshot(s: Served, starterPid: number, name: string): Promise<Watched> {
  const w = await rig.openPage(s.loginUrl);
  await attach(w.page, { starterPid }, name);
  await screenshot(w.page, `${name}-jobs`);
  await takeSnapshot(w.page);
  return w;
}

/** Clicks the matrix cell of sender `row` and receiver `col` (n ranks, zoom 1). */
async function clickCell(page: Page, n: number, row: number, col: number): Promise<void> {
  const canvas = page.getByTestId('matrix-canvas');
  const box = await canvas.boundingBox();
  if (!box) throw new Error('no matrix canvas');
  const side = Math.min(box.width - STRIP - STRIP_GAP, box.height - STRIP - STRIP_GAP);
  const unit = side / n;
  await canvas.click({ position: { x: (col + 0.5) * unit, y: (row + 0.5) * unit } });
}

describe.each(MPI_NAMES)('%s job in the dashboard', (mpi) => {
  it('ring of synchronous sends: the matrix shows the ring, a cell lists its operations, the diagnosis names the cycle', async () => {
    const { s, starterPid } = await start(mpi, 'ring_ssend');
    const { page, errors } = await attachAndSnapshot(s, starterPid, `${mpi}-ring`);
    await page.keyboard.press('m');
    await page.getByTestId('matrix-canvas').waitFor();
    await idle(page);
    await screenshot(page, `${mpi}-ring-matrix`);
    const diagnosis = page.getByTestId('diagnosis');
    await expect.poll(async () => (await diagnosis.textContent()) ?? '').toMatch(/deadlock/i);
    expect(await diagnosis.textContent()).toMatch(/0\s*(→|->)\s*1\s*(→|->)\s*2\s*(→|->)\s*3\s*(→|->)\s*0/);
    // Every cell of the ring holds exactly one operation on tag 42 (a pending send on Open
    // MPI; the unexpected eager-sync message on MPICH, which hides blocking sends).
    for (const [from, to] of [
      [0, 1],
      [1, 2],
      [2, 3],
      [3, 0],
    ] as const) {
      await clickCell(page, 4, from, to);
      await idle(page);
      const rows = page.getByTestId('cell-op-row');
      await expect.poll(() => rows.count()).toBe(1);
      const text = await rows.first().innerText();
      expect(text).toMatch(/42/);
      expect(text).toMatch(mpi === 'openmpi' ? /\bsend/i : /\bunexp/i);
    }
    // A cell off the ring is empty.
    await clickCell(page, 4, 0, 2);
    await idle(page);
    expect(await page.getByTestId('cell-op-row').count()).toBe(0);
    await screenshot(page, `${mpi}-ring-cell`);
    // The admin's fleet view lists this node's agent, connected.
    await page.keyboard.press('f');
    const agent = page.getByTestId('fleet-agent-row').first();
    await agent.waitFor();
    await idle(page);
    expect(await agent.getAttribute('data-connected')).toBe('true');
    await screenshot(page, `${mpi}-fleet`);
    expect(errors).toEqual([]);
  });

  it('wrong tag: the matching order shows the receive for tag 99; a share link opens read-only in a fresh context (4K)', async () => {
    const { s, starterPid } = await start(mpi, 'wrong_tag');
    const { page, errors } = await attachAndSnapshot(s, starterPid, `${mpi}-wrongtag`);
    const here = new URL(page.url());
    here.searchParams.set('view', 'order');
    here.searchParams.set('rank', '0');
    await page.goto(here.toString());
    await idle(page);
    const rows = page.getByTestId('order-row');
    await expect.poll(() => rows.count()).toBeGreaterThan(0);
    expect(await rows.first().innerText()).toMatch(/99/);
    if (mpi === 'mpich') {
      // Both sides visible: the unexpected messages from rank 1 (tags 7, 8) are listed.
      const unexpected = await page.getByTestId('order-unexpected-row').allInnerTexts();
      expect(unexpected.join('\n')).toMatch(/\b7\b/);
      expect(unexpected.join('\n')).toMatch(/\b8\b/);
      // The shared analysis explains the receive: two tag near misses (7 and 8 from rank 1).
      const near = await page.getByTestId('order-near-miss').allInnerTexts();
      expect(near).toHaveLength(2);
      expect(near[0]).toMatch(/tag differs \(7, receive wants 99\)/);
      expect(near[1]).toMatch(/tag differs \(8, receive wants 99\)/);
    } else {
      expect(await page.getByTestId('queue-unavailable').first().innerText()).toMatch(/unexpected/i);
    }
    await screenshot(page, `${mpi}-wrongtag-order`);
    await page.keyboard.press('r');
    await idle(page);
    await page.getByTestId('rank-facts').waitFor();
    await screenshot(page, `${mpi}-wrongtag-rank`);
    await page.keyboard.press('t');
    await idle(page);
    await screenshot(page, `${mpi}-wrongtag-timeline`);

    await page.getByTestId('share-button').click();
    const link = page.getByTestId('share-link');
    await link.waitFor();
    const shareUrl = new URL(await link.locator('input').inputValue(), s.url).toString();
    expect(shareUrl).toMatch(/\/s\/[A-Za-z0-9_-]{22,}/); // >= 128 random bits
    // A fresh context: no session cookie, only the link.
    const shared = await rig.openPage(shareUrl, { width: 3840, height: 2160 });
    await shared.page.getByTestId('read-only-banner').waitFor();
    expect(await shared.page.getByTestId('read-only-banner').innerText()).toMatch(/frozen snapshot taken/i);
    expect(await shared.page.getByTestId('share-button').count()).toBe(0);
    // The link keeps the picture it was made from: the timeline, then the
    // matrix one key away.
    await shared.page.getByTestId('timeline-canvas').waitFor();
    await shared.page.keyboard.press('m');
    await shared.page.getByTestId('matrix-canvas').waitFor();
    await idle(shared.page);
    await screenshot(shared.page, `${mpi}-wrongtag-shared-4k`);
    expect(errors).toEqual([]);
    expect(shared.errors).toEqual([]);
  });
});
