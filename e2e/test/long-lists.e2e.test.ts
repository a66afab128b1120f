// Long lists in Debian's chromium, read as a person reads them. The deep-queues fixture (rank 0
// posts 20,000 equal receives from rank 1, tag 5000, on a real Open MPI build): its Matching
// order draws them as one row "20,000 × from rank 1, tag 5000" within 2 s of asking. A
// 16,384-rank synthetic job whose ranks each wait on their own neighbours (16,384 diagnosis
// groups; the server's fixed reader and fake locator): the banner lists what fits, then "and N
// more groups of ranks", and the matrix stays in view. Every wait is on a condition.
import { syntheticRingRank } from '@mqd/model';
import { createFakeLocator, createFixedReader, serve } from '@mqd/server';
import { describe, expect, it } from 'vitest';
import { e2eServerConfig, idle, screenshot } from './browser.js';
import { attach, DEFAULT_VIEWPORT, e2eRig, takeSnapshot } from './rig.js';

const ADMIN = 'admin-token-for-the-e2e-long-lists-0123456789';
const STRIP = 14; // apps/web/src/matrix/renderer.ts: the ANY/unknown strips beside the matrix
const STRIP_GAP = 6;
const rig = e2eRig({ adminToken: ADMIN });

describe('long lists', () => {
  it('the deep-queues job: Matching order shows the 20,000 receives as one grouped row in < 2 s', async () => {
    const job = await rig.launch({ mpi: 'openmpi', fixture: 'deep_queues', np: 2, timeoutMs: 180_000 });
    const local = await rig.serveLocal();
    const { page, errors } = await rig.openPage(local.served.loginUrl);
    await attach(page, { starterPid: job.starterPid }, 'long-lists-deep');
    await takeSnapshot(page);
    // The view's first paint, from the key press to the grouped row on screen.
    const t0 = Date.now();
    await page.keyboard.press('o');
    const row = page.getByTestId('order-row').first();
    await row.waitFor();
    const ms = Date.now() - t0;
    await idle(page);
    await screenshot(page, 'long-lists-deep-order');
    expect(await page.getByTestId('order-row').count()).toBe(1);
    expect(await row.getAttribute('data-count')).toBe('20000');
    const text = (await row.innerText()).replace(/\s+/g, ' ');
    expect(text).toContain('#0–#19,999 20,000 × from rank 1, tag 5000, up to 4 B');
    expect(text).toContain('None would take a message: nothing visible can satisfy them.');
    expect(ms).toBeLessThan(2000);

    // Rank 0's detail: the same 20,000 receives, one row with their count.
    await page.keyboard.press('r');
    await page.getByTestId('rank-facts').waitFor();
    await idle(page);
    expect(await page.getByTestId('rank-op-count').allInnerTexts()).toEqual(['(20,000 ×)']);
    // Rank 1 blocks in MPI_Recv(source 0, tag 1): its call says whom it waits for.
    const here = new URL(page.url());
    here.searchParams.set('rank', '1');
    await page.goto(here.toString());
    await idle(page);
    expect(await page.getByTestId('rank-mpi-call').innerText()).toMatch(/^MPI_Recv from rank 0, tag 1\b/);

    // The matrix cell of rank 1 → rank 0 lists the same receives as one row, first column in view.
    await page.keyboard.press('m');
    const canvas = page.getByTestId('matrix-canvas');
    await canvas.waitFor();
    await idle(page);
    const box = await canvas.boundingBox();
    if (!box) throw new Error('no matrix canvas');
    const side = Math.min(box.width - STRIP - STRIP_GAP, box.height - STRIP - STRIP_GAP);
    await canvas.click({ position: { x: 0.5 * (side / 2), y: 1.5 * (side / 2) } });
    const cellRow = page.getByTestId('cell-op-row').filter({ hasText: 'recv' }).first();
    await cellRow.waitFor();
    await idle(page);
    await screenshot(page, 'long-lists-deep-cell');
    expect(await cellRow.getAttribute('data-count')).toBe('20000');
    expect((await cellRow.innerText()).replace(/\s+/g, ' ').trim()).toMatch(
      /^recv ?pending \(corrected\) 20,000 × 0 1 5000 4 B MPI_COMM_WORLD 0–19,999$/,
    );
    const panel = await page.getByRole('complementary', { name: 'Selected cell' }).boundingBox();
    const first = await cellRow.locator('td').first().boundingBox();
    expect(first && panel && first.x >= panel.x).toBe(true);
    expect(errors).toEqual([]);
  });

  it('16,384 ranks in 16,384 groups: the banner lists what fits, then "and N more", above a visible matrix', async () => {
    const n = 16_384;
    const ranks = Array.from({ length: n }, (_, r) => syntheticRingRank(r, 20_000 + r, 'node-a', n, 1, 0));
    const snap = {
      schemaVersion: 1 as const,
      takenAt: '2026-03-01T10:00:00.000Z',
      durationMicros: 1000,
      mpi: { library: 'openmpi' as const, dll: null, lengthUnit: 'bytes' as const },
      ranks,
    };
    const starterPid = 4343;
    const s = await serve({
      config: e2eServerConfig(ADMIN),
      reader: createFixedReader(snap),
      locator: createFakeLocator({
        starterPid,
        uid: process.getuid?.() ?? 0,
        command: 'ring16k',
        hosts: ['node-a'],
        ranksPerHost: n,
        basePid: 20_000,
      }),
      localHost: 'node-a',
      print: () => {},
      logger: false,
    });
    rig.cleanup(() => s.close());
    const { page, errors } = await rig.openPage(s.loginUrl);
    await attach(page, { starterPid }, 'long-lists-16k');
    await takeSnapshot(page);
    const more = page.getByTestId('diagnosis-and-more');
    await more.waitFor({ timeout: 60_000 });
    await idle(page, 60_000);
    await screenshot(page, 'long-lists-16k-banner');
    const moreText = await more.innerText();
    const m = /^and ([\d,]+) more groups of ranks$/.exec(moreText.trim());
    expect(m, moreText).not.toBeNull();
    const hidden = Number((m?.[1] ?? '0').replace(/,/g, ''));
    const lines = page.getByTestId('diagnosis-line');
    const shown = await lines.count();
    expect(shown).toBeGreaterThan(0);
    expect(shown).toBeLessThanOrEqual(4);
    // Lines alike but for their ranks are one row with their count.
    const alike = await lines.allInnerTexts();
    expect(
      alike.some((t) => /^[\d,]+ ranks alike \(ranks [\d, -]+\), e\.g\.: Rank \d+ waits/.test(t.trim())),
    ).toBe(true);
    // Every one of the 16,384 groups is either in the banner or counted in "and N more".
    const inBanner = await lines.evaluateAll((els) =>
      els.reduce((k, e) => k + Number(e.getAttribute('data-count') ?? '1'), 0),
    );
    expect(inBanner + hidden).toBe(n);
    // The matrix is on screen, not pushed below the fold.
    const box = await page.getByTestId('matrix-canvas').boundingBox();
    expect(box).not.toBeNull();
    expect((box?.y ?? DEFAULT_VIEWPORT.height) + 100).toBeLessThan(DEFAULT_VIEWPORT.height);
    // "and N more" opens the whole analysis with the rest of the lines.
    await more.click();
    const whole = page.getByTestId('diagnosis-more');
    await whole.waitFor();
    expect(await whole.isVisible()).toBe(true);
    expect(await page.getByTestId('diagnosis-more-lines').innerText()).toMatch(
      /more groups of ranks, not listed one by one/,
    );
    expect(errors).toEqual([]);
  });
});
