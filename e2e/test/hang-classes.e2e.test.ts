// Hangs that are not wait-for cycles, on the dashboard, in Debian's chromium against the real
// aggregator and real hung Open MPI 4.1.4 jobs (fixtures/mpi/README.md, "Hang classes"): a
// receive from a rank that went on into MPI_Finalize, and a barrier the last rank skipped. The
// banner's lead must name the waiting ranks, the call, the tag and the source lines in the words
// `mqd snapshot --explain` uses; the dead-end line's rank link opens that rank. The expected lines
// are read from the fixtures' sources. One job at a time, each ended after its test.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES_DIR, HANG_CLASS_NP } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-hang-class-tests-0123456789' });

/** 1-based line of the first line of fixtures/mpi/`file` that holds `text`. */
function lineOf(file: string, text: string): number {
  const i = readFileSync(join(FIXTURES_DIR, file), 'utf8')
    .split('\n')
    .findIndex((l) => l.includes(text));
  if (i < 0) throw new Error(`MQD_TEST_E_FIXTURE: ${file} has no line with ${JSON.stringify(text)}`);
  return i + 1;
}

/** Launches `fixture` on Open MPI 4.1.4, attaches the dashboard and takes one snapshot. */
async function snapshotOf(fixture: 'finalize_wrong_tag' | 'skip_barrier'): Promise<Page> {
  // Open MPI's MPI_Finalize waits for the whole job, so every rank stays, blocked in its call.
  const job = await rig.launch({ mpi: 'openmpi', fixture, np: HANG_CLASS_NP[fixture] });
  const local = await rig.serveLocal();
  const { page, errors } = await rig.openPage(local.served.loginUrl);
  rig.cleanup(() => expect(errors).toEqual([]));
  await attach(page, { starterPid: job.starterPid }, `openmpi-${fixture}`);
  await takeSnapshot(page);
  await page.getByTestId('diagnosis-lead').waitFor();
  await idle(page);
  return page;
}

const text = async (page: Page, id: string): Promise<string> =>
  (await page.getByTestId(id).innerText()).trim();

/** The whole diagnosis panel as text, for a failure's message: why a rank's stacks are missing, say. */
async function whole(page: Page): Promise<string> {
  return page.getByTestId('diagnosis').evaluate((e) => e.textContent ?? '');
}

describe('openmpi: hang classes on the dashboard', () => {
  it('finalize_wrong_tag: the lead names rank 1, MPI_Recv, tag 5 and rank 0 in MPI_Finalize; its link opens rank 0', async () => {
    const recv = lineOf('finalize_wrong_tag.c', 'MPI_Recv(');
    const fin = lineOf('finalize_wrong_tag.c', 'MPI_Finalize();');
    const page = await snapshotOf('finalize_wrong_tag');
    const sentence = `Rank 1 waits in MPI_Recv for a message from rank 0, tag 5, at finalize_wrong_tag.c:${recv}; rank 0 is in MPI_Finalize (finalize_wrong_tag.c:${fin}) and will never send it.`;
    expect(await text(page, 'diagnosis-verdict')).toBe('Deadlock');
    expect(await text(page, 'diagnosis-lead'), await whole(page)).toBe(sentence);
    const deadEnd = page.getByTestId('diagnosis-dead-end');
    expect(await deadEnd.isVisible()).toBe(true);
    expect((await deadEnd.innerText()).trim().startsWith(sentence)).toBe(true);
    await screenshot(page, 'openmpi-finalize-wrong-tag-diagnosis');

    // The finalized rank is a link: it opens rank 0, in MPI_Finalize.
    await deadEnd
      .locator('a[data-link="rank"]', { hasText: /^rank 0$/ })
      .first()
      .click();
    await page.getByTestId('rank-facts').waitFor();
    await idle(page);
    expect(new URL(page.url()).searchParams.get('rank')).toBe('0');
    expect(await text(page, 'rank-mpi-call')).toMatch(/^MPI_Finalize\b/);

    // The waiting rank's source line is a link to its frame at the receive.
    await page.goBack();
    await deadEnd.waitFor();
    await deadEnd
      .locator('a[data-link="frame"]', { hasText: `finalize_wrong_tag.c:${recv}` })
      .first()
      .click();
    const selected = page.getByTestId('rank-frame-selected');
    await selected.waitFor();
    expect(new URL(page.url()).searchParams.get('rank')).toBe('1');
    expect(await selected.innerText()).toContain(`finalize_wrong_tag.c:${recv}`);
  });

  it('skip_barrier: ranks 0-2 in MPI_Barrier wait for rank 3 in MPI_Finalize, at their lines; its link opens rank 3', async () => {
    const barrier = lineOf('skip_barrier.c', 'MPI_Barrier(');
    const fin = lineOf('skip_barrier.c', 'MPI_Finalize();');
    const page = await snapshotOf('skip_barrier');
    expect(await text(page, 'diagnosis-verdict')).toBe('Collective hang on MPI_COMM_WORLD');
    expect(await text(page, 'diagnosis-lead'), await whole(page)).toBe(
      `ranks 0-2 in MPI_Barrier on MPI_COMM_WORLD, rank 3 in MPI_Finalize (skip_barrier.c:${fin}); they can never meet.`,
    );
    const deadEnd = page.getByTestId('diagnosis-dead-end');
    expect(await deadEnd.isVisible()).toBe(true);
    expect((await deadEnd.innerText()).trim()).toBe(
      `Rank 0 waits in MPI_Barrier for rank 3, at skip_barrier.c:${barrier}; rank 3 is in MPI_Finalize (skip_barrier.c:${fin}) and will never enter it. 2 more waits are on ranks that will never act again.`,
    );
    // Rank 3 is never "computing": the panel says where it is.
    expect(await text(page, 'diagnosis')).not.toContain('computing');
    await screenshot(page, 'openmpi-skip-barrier-diagnosis');

    await deadEnd
      .locator('a[data-link="rank"]', { hasText: /^rank 3$/ })
      .first()
      .click();
    await page.getByTestId('rank-facts').waitFor();
    await idle(page);
    expect(new URL(page.url()).searchParams.get('rank')).toBe('3');
    expect(await text(page, 'rank-mpi-call')).toMatch(/^MPI_Finalize\b/);
  });
});
