// The small words and flows a person meets first, in Debian's chromium against the real aggregator
// and a real hung Open MPI job: Attach opens the job's first snapshot; the footer names the MPI
// library and its DLL by name and version (the path only in its tooltip); the page has one h1 and
// an h2 for the view; the timeline's canvas is a keyboard control (the arrow keys pick a
// snapshot, Enter opens it); a login link that names a snapshot opens it without a login form.
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { e2eRig } from './rig.js';

const ADMIN = 'admin-token-for-the-words-e2e-test-0123456789';
const rig = e2eRig({ adminToken: ADMIN });

const param = (page: Page, name: string) => new URL(page.url()).searchParams.get(name);

describe('the first words of the dashboard', () => {
  it('Attach opens the first snapshot; footer, headings and the timeline keys read right', async () => {
    const job = await rig.launch({ mpi: 'openmpi', fixture: 'wrong_tag', np: 2 });
    const { served } = await rig.serveLocal();
    const { page, errors } = await rig.openPage(served.loginUrl);

    // One h1 for the page; the Jobs view's own h2.
    expect(await page.getByRole('heading', { level: 1 }).allTextContents()).toEqual(['MQD Dashboard']);
    expect(await page.getByRole('heading', { level: 2, name: 'Jobs' }).count()).toBe(1);
    expect(await page.locator('.snapshot-badge').innerText()).toBe('No snapshot selected');

    // Attach, and nothing else: the page takes the job's first snapshot and opens it.
    await page.getByTestId('attach-pid').fill(String(job.starterPid));
    await page.getByTestId('attach-button').click();
    await page
      .getByTestId('matrix-canvas')
      .or(page.getByTestId('error'))
      .first()
      .waitFor({ timeout: 120_000 });
    expect(await page.getByTestId('error').count()).toBe(0);
    await idle(page);
    expect(param(page, 'view')).toBe('matrix');
    const jobId = param(page, 'job');
    const first = param(page, 'snap');
    expect(jobId).not.toBeNull();
    expect(first).not.toBeNull();
    const badge = await page.locator('.snapshot-badge').innerText();
    expect(badge).not.toContain('No snapshot selected');
    expect(badge).toMatch(new RegExp(`^wrong_tag · job ${jobId} · taken `));
    expect(await page.getByTestId('diagnosis').innerText()).toMatch(/deadlock/i);
    expect(await page.getByRole('heading', { level: 2, name: 'Matrix' }).count()).toBe(1);
    await screenshot(page, 'words-after-attach');

    // The footer: the library's name and version and the DLL's file name; its path in the tooltip.
    const stored = await fetch(`${served.url}/api/snapshots/${first}`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    const dll = ((await stored.json()) as { snapshot: { mpi: { dll: string } } }).snapshot.mpi.dll;
    expect(dll).toMatch(/^\/.*\/libompi_dbg_msgq\.so$/);
    const footer = page.getByTestId('footer-library');
    const version = /openmpi-(\d+\.\d+\.\d+)\//.exec(dll)?.[1];
    expect(await footer.innerText()).toBe(`Open MPI${version ? ` ${version}` : ''} · libompi_dbg_msgq.so`);
    expect(await footer.innerText()).not.toContain('/');
    expect((await footer.getAttribute('title'))?.split('\n')[0]).toBe(dll);

    // A second snapshot, then the timeline: a control with a label that answers the keys.
    await page.keyboard.press('j');
    await page.getByTestId('take-snapshot').first().click();
    await page.waitForFunction((s) => new URL(location.href).searchParams.get('snap') !== s, first);
    await page.getByTestId('matrix-canvas').waitFor();
    await idle(page);
    const second = param(page, 'snap');
    await page.keyboard.press('t');
    const canvas = page.getByTestId('timeline-canvas');
    await canvas.waitFor();
    await idle(page);
    expect(await page.getByRole('heading', { level: 2, name: 'Timeline' }).count()).toBe(1);
    const control = page.getByRole('slider', {
      name: 'Queue depth per rank and snapshot: the arrow keys pick a snapshot, Enter opens it',
    });
    expect(await control.count()).toBe(1);
    expect(await control.getAttribute('aria-valuenow')).toBe('2');
    expect(await control.getAttribute('aria-valuemax')).toBe('2');
    await control.focus();
    await page.keyboard.press('ArrowLeft');
    const picked = page.getByTestId('timeline-picked');
    expect(await picked.innerText()).toMatch(/^Snapshot 1 of 2, taken .+: Enter opens it\.$/);
    expect(await control.getAttribute('aria-valuenow')).toBe('1');
    expect(await control.getAttribute('aria-valuetext')).toMatch(/^Snapshot 1 of 2, taken /);
    await page.keyboard.press('ArrowLeft'); // the first stays the first
    expect(await control.getAttribute('aria-valuenow')).toBe('1');
    await page.keyboard.press('ArrowRight');
    expect(await picked.innerText()).toMatch(/^Snapshot 2 of 2, taken /);
    await page.keyboard.press('Home');
    await screenshot(page, 'words-timeline-keys');
    await page.keyboard.press('Enter');
    await page.getByTestId('matrix-canvas').waitFor();
    await idle(page);
    expect(param(page, 'view')).toBe('matrix');
    expect(param(page, 'snap')).toBe(first);
    expect(second).not.toBe(first);
    expect(errors).toEqual([]);

    // The login link the demo prints, naming the snapshot, in a fresh browser: the snapshot
    // opens, not the login form (its first overview waits for the login).
    const link = `${served.url}/?token=${encodeURIComponent(ADMIN)}&view=matrix&job=${jobId}&snap=${first}`;
    const fresh = await rig.openPage(link);
    await fresh.page.getByTestId('matrix-canvas').waitFor();
    await idle(fresh.page);
    expect(await fresh.page.getByRole('textbox', { name: 'Token' }).count()).toBe(0);
    expect(await fresh.page.locator('.snapshot-badge').innerText()).toMatch(/^wrong_tag · job /);
    expect(new URL(fresh.page.url()).searchParams.get('token')).toBeNull();
    expect(fresh.errors).toEqual([]);
  });
});
