// An mpi4py job in Debian's chromium against the real aggregator: a real hung wrong_tag.py
// (Debian's python3 and python3-mpi4py on the debug Open MPI 4.1.4 build) attached through the
// form and snapshotted. The diagnosis names the Python line the ranks wait at; the Stacks view
// shows the Python frames (marked Python, merged by function:line) right above MPI_Recv, none of
// the interpreter's, and its share link opens them in a fresh context; the rank view's stack is
// the mixed one, the interpreter folded, and its source excerpt is the .py file's. The lines are
// read from the script's MQD_LINE markers.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { markerLine, mpi4pyInstalled, mpiAvailable, PYTHON_FIXTURES, pythonLaunch } from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-python-tests-0123456789' });

describe.skipIf(!(mpiAvailable('openmpi') && mpi4pyInstalled()))('an mpi4py job (wrong_tag.py)', () => {
  it('the banner, the Stacks view and the rank view name the Python frames and lines', async () => {
    const recv = markerLine('wrong_tag', 'recv');
    const step = markerLine('wrong_tag', 'step');
    const recvText = readFileSync(join(PYTHON_FIXTURES, 'wrong_tag.py'), 'utf8').split('\n')[recv - 1] ?? '?';
    const job = await rig.launch(pythonLaunch('wrong_tag', 2));
    const local = await rig.serveLocal();
    const { page, errors } = await rig.openPage(local.served.loginUrl);
    await attach(page, { starterPid: job.starterPid }, 'python-wrong-tag');
    await takeSnapshot(page);

    // The diagnosis banner: the mpi4py call and the Python line.
    const cycle = page.getByTestId('diagnosis-cycle');
    await cycle.waitFor();
    expect((await cycle.innerText()).trim()).toBe(
      `Cycle: rank 0 waits for rank 1 (tag 99, wrong_tag.py:${recv}) / rank 1 waits for rank 0 (tag 99, :${recv})`,
    );
    const lines = (await page.getByTestId('diagnosis-line').allInnerTexts()).map((l) => l.trim());
    expect(lines).toEqual([
      `Ranks 0-1 wait in MPI_Recv (comm.recv) for a message from the next rank, tag 99, on MPI_COMM_WORLD, at wrong_tag.py:${recv} in wait_for_left`,
    ]);
    await screenshot(page, 'python-wrong-tag-diagnosis');

    // The Stacks view: wait_for_left at its line, marked Python, under step, over MPI_Recv.
    await page.keyboard.press('s');
    await page.getByTestId('stacks-tree').waitFor();
    await idle(page);
    const frame = page.locator(
      '[data-testid="stack-node"][data-python="true"][data-function="wait_for_left"]',
    );
    await frame.waitFor();
    expect(await frame.getAttribute('data-place')).toBe(`wrong_tag.py:${recv}`);
    expect(await frame.getAttribute('data-ranks')).toBe('0-1');
    expect((await frame.innerText()).replace(/\s+/g, ' ')).toContain(
      `wait_for_left wrong_tag.py:${recv} Python`,
    );
    expect(await frame.getAttribute('aria-label')).toMatch(
      new RegExp(`^Python frame wait_for_left at wrong_tag\\.py:${recv}\\b`),
    );
    // The chain above it (<module> › main › step) is Python too; no row is the interpreter's.
    const rows = await page
      .getByTestId('stack-node')
      .evaluateAll((els) =>
        els.map((e) => `${e.getAttribute('data-function')}|${e.getAttribute('data-python') ?? ''}`),
      );
    expect(rows.filter((r) => /_PyEval|Py[A-Z]\w*_|__pyx_/.test(r))).toEqual([]);
    const at = rows.indexOf('wait_for_left|true');
    expect(rows[at + 1], rows.join('\n')).toMatch(/^P?MPI_Recv\|$/);
    await frame.click();
    const selected = page.getByTestId('stack-selected');
    await selected.waitFor();
    expect(await selected.innerText()).toContain('Python frame');
    expect(await selected.innerText()).toContain(
      `step at wrong_tag.py:${step} › wait_for_left at wrong_tag.py:${recv}`,
    );
    await screenshot(page, 'python-wrong-tag-stacks');

    // A share link of this view opens, in a fresh context with no session, the same Python frame and line.
    await page.getByTestId('share-button').click();
    const linkBox = page.getByTestId('share-link').locator('input');
    await linkBox.waitFor();
    const shared = await rig.openPage(await linkBox.inputValue());
    await shared.page.getByTestId('read-only-banner').waitFor();
    await shared.page.getByTestId('stacks-tree').waitFor();
    await idle(shared.page);
    const sharedFrame = shared.page.getByTestId('stack-selected');
    expect(await sharedFrame.innerText()).toContain(`wait_for_left wrong_tag.py:${recv}`);
    expect(await sharedFrame.innerText()).toContain('Python frame');
    expect((await shared.page.getByTestId('diagnosis-line').allInnerTexts()).map((l) => l.trim())).toEqual(
      lines,
    );
    expect(shared.errors).toEqual([]);

    // The rank view: the mixed stack (Python frames marked, the interpreter folded) and the .py excerpt.
    await page.getByTestId('stack-to-rank').click();
    await page.getByTestId('rank-threads').waitFor();
    await idle(page);
    expect((await page.getByTestId('rank-sentence').innerText()).trim()).toBe(
      `Rank 0 waits in MPI_Recv (comm.recv) for a message from rank 1, tag 99, on MPI_COMM_WORLD, at wrong_tag.py:${recv} in wait_for_left`,
    );
    const main = page.locator('[data-testid="rank-thread"]', {
      has: page.locator('.badge', { hasText: 'main' }),
    });
    const pyRows = (await main.locator('tr[data-python="true"]').allInnerTexts()).map((t) =>
      t.replace(/\s+/g, ' ').trim(),
    );
    expect(pyRows.map((r) => r.replace(/^\d+ /, ''))).toEqual([
      `wait_for_left wrong_tag.py:${recv} Python`,
      `step wrong_tag.py:${step} Python`,
      `main wrong_tag.py:${markerLine('wrong_tag', 'main')} Python`,
      `<module> wrong_tag.py:${markerLine('wrong_tag', 'main') + 3} Python`,
    ]);
    const allRows = (await main.locator('tbody tr').allInnerTexts()).join('\n');
    expect(allRows).not.toMatch(/_PyEval_EvalFrameDefault|libpython|python3\.11/);
    expect(await main.getByTestId('rank-frames-folded').innerText()).toMatch(
      /^\d+ frames of the Python interpreter and mpi4py folded\.$/,
    );
    const current = page.getByTestId('rank-source').getByTestId('rank-source-line');
    expect(await current.getAttribute('data-line')).toBe(String(recv));
    expect(await current.innerText()).toContain(recvText.trim());
    await screenshot(page, 'python-wrong-tag-rank');

    // The banner's frame link opens the rank at its Python frame.
    await page.goBack();
    await page.goBack();
    await cycle.waitFor();
    await page.getByTestId('diagnosis-line').locator('a[data-link="frame"]').first().click();
    const row = page.getByTestId('rank-frame-selected');
    await row.waitFor();
    expect((await row.innerText()).replace(/\s+/g, ' ')).toContain(
      `wait_for_left wrong_tag.py:${recv} Python`,
    );
    expect(errors).toEqual([]);
  });
});
