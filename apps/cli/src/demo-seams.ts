// The demo's stand-in job: a synthetic hung job served beside the node's real MPI jobs, so the
// dashboard has something to show while the demo's MPI library is still being built. Requests
// for its pids go to fakes, everything else to the real seams; its pids lie above any kernel's
// pid_max (2^22), so no real process can ever be routed to the fakes.
import { type DiscoveryScan, syntheticWrongTagHang } from '@mqd/model';
import {
  createFakeDiscovery,
  createFakeLocator,
  createFixedReader,
  type FakeJob,
  fakeDiscoveredJob,
  type JobDiscovery,
  type JobLocator,
  type RankReader,
} from '@mqd/server';

/** The seams of a local agent (what serveWithLocalAgent builds). */
export interface LocalSeams {
  readonly reader: RankReader;
  readonly locator: JobLocator;
  readonly discovery: JobDiscovery;
}

/** Above the largest pid_max Linux allows (4,194,304), within the protocol's pid range. */
export const SYNTHETIC_STARTER_PID = 0x3fff_0000;

/** What the page and the job list show of the stand-in: it must never pass for a real job. */
export const SYNTHETIC_COMMAND =
  'SYNTHETIC demo job, not a real MPI job (shown while the real one is being built)';

export interface SyntheticJobOptions {
  /** The node the agent serves (its ranks' host). */
  readonly host: string;
  /** Owner of the stand-in's ranks: the user running the demo, so the hang watch reads them. */
  readonly uid: number;
  readonly ranks?: number;
  /** Default SYNTHETIC_STARTER_PID; a second stand-in needs its own. */
  readonly starterPid?: number;
  readonly command?: string;
}

export function syntheticDemoJob(o: SyntheticJobOptions): FakeJob {
  const starterPid = o.starterPid ?? SYNTHETIC_STARTER_PID;
  return {
    starterPid,
    uid: o.uid,
    command: o.command ?? SYNTHETIC_COMMAND,
    hosts: [o.host],
    ranksPerHost: o.ranks ?? 4,
    basePid: starterPid + 1,
    startedAt: Date.now(),
  };
}

/** `real` plus the stand-in jobs `jobs`, each a wrong-tag hang that never moves. */
export function withSyntheticJobs(real: LocalSeams, jobs: readonly FakeJob[]): LocalSeams {
  const fakes = jobs.map((job) => {
    const pids = new Set(Array.from({ length: job.ranksPerHost }, (_, i) => (job.basePid ?? 0) + i));
    return {
      job,
      pids,
      reader: createFixedReader(
        syntheticWrongTagHang({
          ranks: job.ranksPerHost,
          style: 'openmpi',
          takenAt: new Date().toISOString(),
        }),
      ),
      locator: createFakeLocator(job),
      discovery: createFakeDiscovery(job.hosts.map((h) => fakeDiscoveredJob(job, h))),
    };
  });
  const byPid = (pid: number) => fakes.find((f) => f.pids.has(pid));
  const byStarter = (pid: number) => fakes.find((f) => f.job.starterPid === pid);

  const reader: RankReader = {
    get mpi() {
      return real.reader.mpi;
    },
    async read(ranks, opts) {
      // A job is either all stand-in or all real: its first rank says which.
      const fake = ranks[0] === undefined ? undefined : byPid(ranks[0].pid);
      return fake ? fake.reader.read(ranks, opts) : real.reader.read(ranks, opts);
    },
    ...(real.reader.readCores ? { readCores: real.reader.readCores.bind(real.reader) } : {}),
    ...(real.reader.capture ? { capture: real.reader.capture.bind(real.reader) } : {}),
  };
  const locator: JobLocator = {
    async locate(starterPid) {
      return (byStarter(starterPid)?.locator ?? real.locator).locate(starterPid);
    },
    async list() {
      const own = (await real.locator.list?.()) ?? [];
      const stand = await Promise.all(fakes.map((f) => f.locator.list?.() ?? []));
      return [...own, ...stand.flat()];
    },
    ...(real.locator.locateSlurm ? { locateSlurm: real.locator.locateSlurm.bind(real.locator) } : {}),
    ...(real.locator.locateCores ? { locateCores: real.locator.locateCores.bind(real.locator) } : {}),
  };
  const standInJobs = async () => (await Promise.all(fakes.map((f) => f.discovery.discover()))).flat();
  const discovery: JobDiscovery = {
    async discover() {
      return [...(await real.discovery.discover()), ...(await standInJobs())];
    },
    async scan(): Promise<DiscoveryScan> {
      const own = real.discovery.scan
        ? await real.discovery.scan()
        : { jobs: await real.discovery.discover(), complete: true, omitted: [] };
      return { ...own, jobs: [...own.jobs, ...(await standInJobs())] };
    },
    async counters(p) {
      const first = p.ranks[0];
      const fake = first === undefined ? undefined : byPid(first.pid);
      return (fake?.discovery ?? real.discovery).counters(p);
    },
  };
  return { reader, locator, discovery };
}
