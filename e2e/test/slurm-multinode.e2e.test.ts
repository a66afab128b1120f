// The dashboard attaches a two-node Slurm job by its id, in chromium. A real two-node
// Slurm of network namespaces (@mqd/testkit startSlurm({netns}): slurmctld in the aggregator's
// namespace, a slurmd in node1's and in node2's, each node with its own host name), a hung MPICH
// wrong_tag fixture sbatch'ed -N2 (ranks 0-1 on node1, 2-3 on node2, talking TCP over the veths),
// `mqd serve --no-local-agent` in the aggregator's namespace and one `mqd agent` per node, started
// as on that node, as apps/cli/test/slurm-multinode.mpi.test.ts does (both through @mqd/testkit
// startSlurmRig). The browser types the job id (and the batch host) into the attach form, takes a
// snapshot, and must show every rank on its own node (the rank view's host / pid) and the hang's
// diagnosis. Every wait is on a condition.
//
// Where the browser reaches the aggregator: the aggregator stays in its namespace, where the
// nodes' agents reach it over the veths (the nodes route nowhere else, and nothing is added to
// this machine's own network namespace). The test reaches it as the CLI test does, through
// fixtures/netns/unix-forward.mjs's socket (a path socket, visible from every namespace); chromium
// speaks only TCP, so a loopback bridge in this process (testkit tcpToUnix) pipes its connections,
// socket.io's WebSocket included, to that socket unchanged. The page's Origin and Host are then
// both 127.0.0.1:PORT, as for a browser next to any aggregator.
import {
  expectedBlockingCall,
  fixtureBinary,
  netnsId,
  netnsOfPid,
  type SlurmRig,
  slurmAvailable,
  startSlurmRig,
  type TcpBridge,
  tcpToUnix,
  teardownAll,
  untilRanksBlocked,
} from '@mqd/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { idle, screenshot } from './browser.js';
import { attach, e2eRig, takeSnapshot } from './rig.js';

const RUN = `mqde${process.pid}`;
const ADMIN_TOKEN = `admin-${RUN}-0123456789abcdef`;
const AGENT_TOKEN = `agent-${RUN}-0123456789abcdef`;
const HOSTS = ['node1', 'node2'] as const;
/** --ntasks-per-node=2: ranks 0-1 on node1 (the batch host), 2-3 on node2. */
const HOST_OF_RANK = ['node1', 'node1', 'node2', 'node2'] as const;
const START_TIMEOUT_MS = 60_000;

const rig = e2eRig({ adminToken: ADMIN_TOKEN });
/** The two-node Slurm, the aggregator and an agent per node (@mqd/testkit startSlurmRig). */
let slurmRig: SlurmRig | null = null;
let bridge: TcpBridge | null = null;

function theSlurmRig(): SlurmRig {
  if (slurmRig === null) throw new Error('the Slurm rig was not started');
  return slurmRig;
}
function theBridge(): TcpBridge {
  if (bridge === null) throw new Error('the bridge to the aggregator was not started');
  return bridge;
}

beforeAll(async () => {
  if (!slurmAvailable()) throw new Error('MQD_E_PROVISION: Slurm is not installed; run scripts/provision.sh');
  // Compile (or find) the fixture before anything is started.
  fixtureBinary('mpich', 'wrong_tag');
  slurmRig = await startSlurmRig({
    run: RUN,
    adminToken: ADMIN_TOKEN,
    agentToken: AGENT_TOKEN,
    hosts: HOSTS,
    timeoutMs: START_TIMEOUT_MS,
  });
  bridge = await tcpToUnix(slurmRig.served.socketPath);
}, 180_000);

afterEach(() => slurmRig?.cancelJobs());

afterAll(async () => {
  // The bridge first: it pipes into the aggregator the rig kills.
  await teardownAll('Slurm multi-node e2e', [() => bridge?.close(), () => slurmRig?.dispose()]);
}, 60_000);

describe('a Slurm job on two nodes in the dashboard', () => {
  it('is attached by its job id in the form; the snapshot shows the ranks of both nodes and the hang', async () => {
    const c = theSlurmRig().cluster;
    const job = await theSlurmRig().submit({
      mpi: 'mpich',
      fixture: 'wrong_tag',
      nodes: 2,
      timeoutMs: START_TIMEOUT_MS,
    });
    expect(job.ranks.map((r) => r.rank)).toEqual([0, 1, 2, 3]);
    // The ranks really run on two nodes: each in its node's network namespace.
    expect(job.ranks.map((r) => netnsOfPid(r.pid))).toEqual(
      HOST_OF_RANK.map((h) => netnsId(c.node(h).netns)),
    );
    // Every rank inside its call, so it has taken in the messages that crossed the veths, as a
    // hung job has when someone looks at it.
    await untilRanksBlocked(job.ranks, (r) => expectedBlockingCall('wrong_tag', r), START_TIMEOUT_MS);

    // Logged in as the aggregator's printed login URL does, through the bridge.
    const w = await rig.openPage(`${theBridge().url}/?token=${encodeURIComponent(ADMIN_TOKEN)}`);
    const { page } = w;
    // The batch host: its agent names node2 as the job's other node.
    await attach(page, { slurmJob: job.jobId, host: 'node1' }, 'slurm-multinode');
    const row = page.getByTestId('job-row').first();
    expect(await row.innerText()).toContain(`Slurm job ${job.jobId} (wrong_tag)`);
    await screenshot(page, 'slurm-multinode-jobs');
    await takeSnapshot(page);

    // The hang: rank 0 waits for tag 99 from rank 1, which waits for rank 0.
    const diagnosis = page.getByTestId('diagnosis');
    await expect.poll(async () => (await diagnosis.textContent()) ?? '').toMatch(/deadlock/i);
    const verdict = (await diagnosis.textContent()) ?? '';
    expect(verdict).toMatch(/4 of 4 ranks can never proceed/);
    expect(verdict).toMatch(/0\s*(→|->)\s*1\s*(→|->)\s*0/);
    await screenshot(page, 'slurm-multinode-matrix');

    // Every rank, on its own node: the rank view names the host and the pid sbatch started.
    const here = new URL(page.url());
    for (const r of job.ranks) {
      here.searchParams.set('view', 'rank');
      here.searchParams.set('rank', String(r.rank));
      await page.goto(here.toString());
      await idle(page);
      const facts = page.getByTestId('rank-facts');
      await facts.waitFor();
      expect(await facts.innerText()).toContain(`${HOST_OF_RANK[r.rank]} / ${r.pid}`);
      if (r.rank === 2) await screenshot(page, 'slurm-multinode-rank2-node2');
    }

    // Rank 0's matching order: the unexpected messages of both nodes' senders (tags 7 and 8 from
    // rank 1 on node1, 12 and 13 from ranks 2 and 3 on node2), read where rank 0 runs.
    here.searchParams.set('view', 'order');
    here.searchParams.set('rank', '0');
    await page.goto(here.toString());
    await idle(page);
    const unexpected = page.getByTestId('order-unexpected-row');
    await expect.poll(() => unexpected.count()).toBe(4);
    const tags = (await unexpected.allInnerTexts()).join('\n');
    for (const tag of [7, 8, 12, 13]) expect(tags).toMatch(new RegExp(`\\b${tag}\\b`));
    await screenshot(page, 'slurm-multinode-order');
    expect(w.errors).toEqual([]);
  });
});
