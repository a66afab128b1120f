// The real JobLocator for agents: @mqd/mpir behind the server's seam. Runs on the node of the
// starter (mpirun / mpiexec): reads its MPIR table, or falls back to the process tree, in a
// child running as the starter's owner (locate-as-owner.ts); local ranks of another uid are
// dropped, and every local rank and the starter are pinned by their start time.
import { readdirSync, readFileSync } from 'node:fs';
import { procStartTime } from '@mqd/core';
import { type MqdError, ok, type Result } from '@mqd/model';
import { type LocalHost, localHost } from '@mqd/mpir';
import type { JobLocator, LocatedJob, SeenStarter } from '@mqd/server/agent';
import { locateAsOwner } from './locate-as-owner.js';

/** Process names of MPI starters an agent reports before anyone attaches. */
const STARTERS = new Set(['mpirun', 'mpiexec', 'orterun', 'mpiexec.hydra', 'prterun', 'srun']);

export class MpirJobLocator implements JobLocator {
  private readonly here: LocalHost;

  /** `agentHost`: the name this node's agent registered with; the starter's own names for this machine map to it. */
  constructor(
    agentHost?: string,
    private readonly opts: { log?: (line: string) => void } = {},
  ) {
    const machine = localHost();
    this.here = agentHost ? { short: agentHost, aliases: new Set([agentHost, ...machine.aliases]) } : machine;
  }

  async locate(starterPid: number): Promise<Result<LocatedJob, MqdError>> {
    const r = await locateAsOwner(starterPid, this.here);
    if (!r.ok) return r;
    const { job: j, ranks, uid, starterStartTime, warnings } = r.value;
    for (const w of warnings) this.opts.log?.(`starter ${starterPid}: ${w}`);
    return ok({
      ranks: ranks.map((x) => ({
        rank: x.rank,
        pid: x.pid,
        host: x.host,
        ...(x.startTime !== undefined ? { startTime: x.startTime } : {}),
      })),
      method: j.method,
      // The starter's real uid as this side read it from /proc, not what the child said.
      uid,
      command: j.starter?.command ?? '',
      starterStartTime,
    });
  }

  async list(): Promise<readonly SeenStarter[]> {
    const out: SeenStarter[] = [];
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const comm = readFileSync(`/proc/${d}/comm`, 'utf8').trim();
        if (!STARTERS.has(comm)) continue;
        const status = readFileSync(`/proc/${d}/status`, 'utf8');
        const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1);
        const command = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
        const startTime = procStartTime(Number(d));
        out.push({ starterPid: Number(d), uid, command, ...(startTime !== null ? { startTime } : {}) });
      } catch {
        // the process ended while we looked: not a starter any more
      }
    }
    return out;
  }
}
