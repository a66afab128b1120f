// The real JobLocator for agents: @mqd/mpir behind the server's seam. Runs on the node of the
// starter (mpirun / mpiexec): reads its MPIR table, or falls back to the process tree.
import { readdirSync, readFileSync } from 'node:fs';
import { type MqdError, ok, type Result } from '@mqd/model';
import { attachStarter, type LocalHost, localHost } from '@mqd/mpir';
import type { JobLocator, LocatedJob, SeenStarter } from '@mqd/server';

/** Process names of MPI starters an agent reports before anyone attaches. */
const STARTERS = new Set(['mpirun', 'mpiexec', 'orterun', 'mpiexec.hydra', 'prterun', 'srun']);

export class MpirJobLocator implements JobLocator {
  private readonly here: LocalHost;

  /** `agentHost`: the name this node's agent registered with; the starter's own names for this machine map to it. */
  constructor(agentHost?: string) {
    const machine = localHost();
    this.here = agentHost ? { short: agentHost, aliases: new Set([agentHost, ...machine.aliases]) } : machine;
  }

  async locate(starterPid: number): Promise<Result<LocatedJob, MqdError>> {
    const r = attachStarter(starterPid, { here: this.here });
    if (!r.ok) return r;
    const j = r.value;
    return ok({
      ranks: j.ranks.map((x) => ({ rank: x.rank, pid: x.pid, host: x.host })),
      method: j.method,
      uid: j.starter?.uid ?? 0,
      command: j.starter?.command ?? '',
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
        out.push({ starterPid: Number(d), uid, command });
      } catch {
        // the process ended while we looked: not a starter any more
      }
    }
    return out;
  }
}
