// What the dashboard shows of a hybrid job's OpenMP threads, rendered to static
// markup (node, no DOM): the rank view's OpenMP panel and each thread's state, the stacks
// view's states of the threads through a frame, and the diagnosis's summary across ranks.
// The test ids and texts asserted here are the ones the e2e test looks for.
import {
  explainSnapshot,
  type JobSnapshot,
  type RankSnapshot,
  syntheticOpenMpJob,
  syntheticRingDeadlock,
} from '@mqd/model';
import { createElement } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import { describe, expect, it } from 'vitest';
import type { Api } from '../src/api.js';
import { Diagnosis } from '../src/Diagnosis.js';
import { type LoadedSnapshot, localSnapshot } from '../src/data.js';
import { bannerText, explanationOf } from '../src/explanation.js';
import { OpenMpPanel } from '../src/rank/OpenMpPanel.js';
import { RankView } from '../src/rank/RankView.js';
import { StacksView } from '../src/stacks/StacksView.js';
import { computeStackTree } from '../src/stacks/stack-tree.js';
import { DEFAULT_STATE, type UrlState } from '../src/url-state.js';

const loaded = (snapshot: JobSnapshot): LoadedSnapshot =>
  localSnapshot(`t:${snapshot.takenAt}:${snapshot.ranks.length}`, snapshot, true);
const view = (snapshot: JobSnapshot, url: Partial<UrlState>) => ({
  api: {} as Api,
  url: { ...DEFAULT_STATE, ...url },
  setUrl: () => {},
  data: loaded(snapshot),
});
const rank = (s: JobSnapshot, r: number): RankSnapshot => {
  const x = s.ranks[r];
  if (!x) throw new Error('fixture');
  return x;
};
/** The rows of one test id, as the markup's opening tags. */
const tags = (html: string, testId: string) =>
  html.match(new RegExp(`<[a-z]+[^>]*data-testid="${testId}"[^>]*>`, 'g')) ?? [];

describe('the rank view OpenMP panel', () => {
  it('lists every OpenMP thread with state, wait id, region and task, the MPI thread marked with its call', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'taskwait' });
    const html = renderToStaticMarkup(createElement(OpenMpPanel, { rank: rank(s, 0) }));
    expect(html).toMatch(/data-testid="openmp-panel"[^>]*data-status="read"[^>]*data-block="mpi"/);
    const rows = tags(html, 'openmp-thread');
    expect(rows).toHaveLength(4);
    expect(rows.map((r) => /data-state="([^"]+)"/.exec(r)?.[1])).toEqual([
      'ompt_state_work_parallel',
      'ompt_state_wait_barrier_implicit_parallel',
      'ompt_state_work_parallel',
      'ompt_state_wait_barrier_implicit_parallel',
    ]);
    const inMpi = rows.filter((r) => r.includes('data-mpi-call="MPI_Recv"'));
    expect(inMpi).toHaveLength(1);
    expect(inMpi[0]).toContain('data-tid="20002"');
    expect(inMpi[0]).toContain('class="in-mpi');
    expect(html).toContain(
      '<span class="badge mpi-call" data-testid="openmp-thread-mpi-call">MPI_Recv</span>',
    );
    expect(html).toContain('.omp_task_entry.</span> <span class="muted">explicit</span>');
    expect(html).toContain('team of 4, level 1');
    expect(html).toMatch(/data-testid="openmp-summary">thread 2 in MPI_Recv inside an explicit task/);
  });

  it('names the lock each thread waits for, and says a lock deadlock', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'lock-deadlock' });
    const html = renderToStaticMarkup(createElement(OpenMpPanel, { rank: rank(s, 0) }));
    expect(html).toContain('data-block="openmp"');
    expect(html).toContain('OpenMP deadlock: no thread can proceed');
    expect(html).toContain('<code>0x55d0c0a04020</code>');
    expect(html).toContain('<code>0x55d0c0a04000</code>');
  });

  it('shows the coded reason when OMPD was unavailable, says "no runtime" for null, nothing when not read', () => {
    const ring = syntheticRingDeadlock({ ranks: 2, style: 'openmpi' });
    const r0 = rank(ring, 0);
    const error = renderToStaticMarkup(
      createElement(OpenMpPanel, {
        rank: {
          ...r0,
          openmpError: { code: 'MQD_E_OMPD_DISABLED', message: 'run the job with OMP_DEBUG=enabled' },
        },
      }),
    );
    expect(error).toContain('data-status="error"');
    expect(error).toMatch(
      /data-testid="openmp-error"><strong>MQD_E_OMPD_DISABLED<\/strong> run the job with OMP_DEBUG=enabled/,
    );
    const none = renderToStaticMarkup(createElement(OpenMpPanel, { rank: { ...r0, openmp: null } }));
    expect(none).toContain('No OpenMP runtime in this rank.');
    expect(renderToStaticMarkup(createElement(OpenMpPanel, { rank: r0 }))).toBe('');
  });

  it('the rank view carries the panel and each stack thread its OpenMP state', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'single-recv' });
    const html = renderToStaticMarkup(createElement(RankView, view(s, { view: 'rank', rank: 1 })));
    expect(html).toContain('data-testid="openmp-panel"');
    const states = html.match(/data-testid="thread-omp-state"[^>]*>OpenMP [a-z_]+/g) ?? [];
    expect(states.map((x) => x.replace(/.*>/, ''))).toEqual([
      'OpenMP work_parallel',
      'OpenMP wait_barrier',
      'OpenMP wait_barrier',
      'OpenMP wait_barrier',
    ]);
  });
});

describe('the stacks view', () => {
  it('gives the OpenMP states of the threads through the selected frame', () => {
    const s = syntheticOpenMpJob({ ranks: 2, scenario: 'single-recv' });
    const tree = computeStackTree(s, 'all');
    if ('failed' in tree) throw new Error(tree.failed);
    const node = tree.nodes.find((n) => n.function === '__kmp_barrier');
    if (!node) throw new Error('no barrier frame');
    const html = renderToStaticMarkup(
      createElement(StacksView, view(s, { view: 'stacks', threads: 'all', snode: node.id })),
    );
    expect(html).toContain('data-testid="stack-omp-states"');
    expect(html).toContain('<li data-state="wait_barrier">6 threads OpenMP wait_barrier</li>');
  });
});

describe('the diagnosis', () => {
  it('lists the OpenMP picture across ranks, the OpenMP deadlock first in the banner', () => {
    const s = syntheticOpenMpJob({ ranks: 3, scenario: 'lock-deadlock' });
    explanationOf(s);
    const html = renderToStaticMarkup(createElement(Diagnosis, { data: loaded(s) }));
    expect(html).toContain('class="diagnosis verdict-openmp-hang"');
    expect(html).toMatch(/data-testid="diagnosis-verdict">OpenMP deadlock</);
    const groups = tags(html, 'diagnosis-openmp-group');
    expect(
      groups.map((g) => [/data-ranks="([^"]+)"/.exec(g)?.[1], /data-block="([^"]+)"/.exec(g)?.[1]]),
    ).toEqual([
      ['1-2', 'none'],
      ['0', 'openmp'],
    ]);
    expect(html).toContain(
      'rank 0: 2 threads deadlocked on OpenMP locks 0x55d0c0a04020 and 0x55d0c0a04000 (each waits for a lock another holds), no MPI call pending',
    );
  });

  it('says where OpenMP could not be read, as a limit', () => {
    const ring = syntheticRingDeadlock({ ranks: 4, style: 'openmpi' });
    const err = {
      code: 'MQD_E_OMPD_DISABLED',
      message: 'MQD_E_OMPD_DISABLED: run the job with OMP_DEBUG=enabled',
    };
    const s = { ...ring, ranks: ring.ranks.map((r) => ({ ...r, openmpError: err })) };
    explanationOf(s);
    const html = renderToStaticMarkup(createElement(Diagnosis, { data: loaded(s) }));
    expect(html).toContain(
      '<li data-limit="openmp-unavailable">OpenMP state unavailable on ranks 0-3: MQD_E_OMPD_DISABLED: run the job with OMP_DEBUG=enabled</li>',
    );
    expect(html).not.toContain('data-testid="diagnosis-openmp"');
  });

  it('the banner names the new verdict', () => {
    const e = explainSnapshot(syntheticOpenMpJob({ ranks: 2, scenario: 'lock-deadlock' }));
    expect(bannerText(e).verdict).toBe('OpenMP deadlock');
    expect(bannerText({ ...e, headline: '', lead: '' }).verdict).toBe('OpenMP deadlock');
  });
});
