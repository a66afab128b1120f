// The OpenMP panel in Debian's chromium against the real aggregator and agent, on real
// hybrid MPI+OpenMP jobs (fixtures/hybrid, LLVM's OMPD-enabled runtime, OMP_DEBUG=enabled):
// the job attached through the form, a snapshot taken, then the diagnosis's OpenMP line across
// ranks and the rank view's thread table. omp_single_recv under both MPIs (one thread of each
// team in MPI_Recv inside `omp single`, its teammates at the barrier); omp_lock_deadlock (an
// OpenMP deadlock with no MPI call pending); and a job run without OMP_DEBUG (the coded reason
// saying what to set). Screenshots go to e2e/artifacts/. Every wait is on a condition.
import { MPI_NAMES, type MpiName } from '@mqd/testkit';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot, type Watched } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const rig = e2eRig({ adminToken: 'admin-token-for-the-e2e-openmp-tests-0123456789' });

/** Launches a hybrid fixture, serves the dashboard, attaches the job and takes a snapshot. */
async function attachAndSnapshot(
  mpi: MpiName,
  fixture: string,
  unsetEnv: readonly string[] = [],
): Promise<Watched> {
  const job = await rig.launch({ mpi, fixture, hybrid: true, unsetEnv });
  const local = await rig.serveLocal();
  const w = await rig.openPage(local.served.loginUrl, { width: 1280, height: 900 });
  await attach(w.page, { starterPid: job.starterPid }, `${mpi}-${fixture}`);
  await takeSnapshot(w.page);
  return w;
}

async function openDiagnosis(page: Page): Promise<string> {
  const diagnosis = page.getByTestId('diagnosis');
  // The diagnosis is open by default: a click on its summary would fold it.
  await diagnosis.locator('summary').waitFor();
  return (await diagnosis.textContent()) ?? '';
}

async function openRank(page: Page): Promise<void> {
  await page.keyboard.press('r');
  await page.getByTestId('openmp-panel').waitFor();
  await idle(page);
}

// One build: the page asserts the same OpenMP threads under either MPI, and what MQD
// reads of them beside every MPI build is packages/mqd-core/test/ompd.mpi.test.ts's.
describe.each(MPI_NAMES.slice(0, 1))('%s: a hybrid job in the dashboard', (mpi) => {
  it('omp_single_recv: one thread in MPI_Recv, its team at the barrier, in words and in the rank view', async () => {
    const { page, errors } = await attachAndSnapshot(mpi, 'omp_single_recv');
    await openDiagnosis(page);
    const group = page.locator('[data-testid="diagnosis-openmp-group"][data-ranks="0-1"]');
    await group.waitFor();
    expect(await group.getAttribute('data-block')).toBe('mpi');
    expect(await group.textContent()).toMatch(
      /^ranks 0-1: thread 0 in MPI_Recv inside a parallel region \(team of 4\), 3 threads wait at a barrier/,
    );
    await screenshot(page, `${mpi}-omp-single-recv-diagnosis`);

    await openRank(page);
    const panel = page.getByTestId('openmp-panel');
    expect(await panel.getAttribute('data-status')).toBe('read');
    expect(await panel.getAttribute('data-block')).toBe('mpi');
    const rows = page.getByTestId('openmp-thread');
    expect(await rows.count()).toBe(4);
    const inMpi = page.locator('[data-testid="openmp-thread"][data-mpi-call="MPI_Recv"]');
    expect(await inMpi.count()).toBe(1);
    expect(await inMpi.getAttribute('data-thread-num')).toBe('0');
    expect(await inMpi.getAttribute('data-state')).toBe('ompt_state_work_parallel');
    expect(
      await page.locator('[data-testid="openmp-thread"][data-state^="ompt_state_wait_barrier"]').count(),
    ).toBe(3);
    expect(await page.getByTestId('openmp-summary').textContent()).toMatch(/^thread 0 in MPI_Recv/);
    // The stacks' threads carry their OpenMP state.
    expect(await page.getByTestId('thread-omp-state').count()).toBeGreaterThanOrEqual(4);
    await screenshot(page, `${mpi}-omp-single-recv-rank`);
    expect(errors).toEqual([]);
  });
});

describe('OpenMP deadlock and OMPD unavailable', () => {
  it('omp_lock_deadlock: the verdict is an OpenMP deadlock with no MPI call pending', async () => {
    const { page, errors } = await attachAndSnapshot('openmpi', 'omp_lock_deadlock');
    const text = await openDiagnosis(page);
    expect(await page.getByTestId('diagnosis-verdict').textContent()).toMatch(/OpenMP deadlock/);
    expect(text).toMatch(/2 threads deadlocked on OpenMP locks/);
    expect(text).toMatch(/no MPI call pending/);
    await screenshot(page, 'openmpi-omp-lock-deadlock-diagnosis');
    await openRank(page);
    expect(await page.getByTestId('openmp-panel').getAttribute('data-block')).toBe('openmp');
    const waitIds = await page
      .locator('[data-testid="openmp-thread"][data-state="ompt_state_wait_lock"] code')
      .allTextContents();
    expect(waitIds.length).toBe(2);
    expect(new Set(waitIds).size).toBe(2);
    await screenshot(page, 'openmpi-omp-lock-deadlock-rank');
    expect(errors).toEqual([]);
  });

  it('OMP_DEBUG unset: the rank view and the diagnosis say what to set', async () => {
    const { page, errors } = await attachAndSnapshot('mpich', 'omp_single_recv', ['OMP_DEBUG']);
    await openDiagnosis(page);
    const limit = page.locator('li[data-limit="openmp-unavailable"]');
    await limit.waitFor();
    expect(await limit.textContent()).toMatch(/^OpenMP state unavailable on ranks 0-1: MQD_E_OMPD_DISABLED/);
    await openRank(page);
    expect(await page.getByTestId('openmp-panel').getAttribute('data-status')).toBe('error');
    expect(await page.getByTestId('openmp-error').textContent()).toMatch(
      /MQD_E_OMPD_DISABLED.*OMP_DEBUG=enabled/,
    );
    await screenshot(page, 'mpich-omp-debug-unset-rank');
    expect(errors).toEqual([]);
  });
});
