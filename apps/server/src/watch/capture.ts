// The hang watch's cores (policy captureCores): what the watcher needs of the
// agents to keep `mqd capture` cores of a job when it becomes hung. The agent hub (hub.ts
// `capture`) has it; a WatchAgents without it (a test's fake) keeps no cores. Each node's
// agent writes its ranks' cores as the job's owner into `<its first --core-dir>/<name>`.
import type { ApiFleetCores, Result } from '@mqd/model';
import type { HubCapture } from '../hub/hub.js';
import type { CounterTarget, WatchAgents } from './source.js';

/** The answer of one node: the directory written and each asked rank's core or error (the hub's). */
export type CaptureReply = HubCapture;

export interface CaptureAgents {
  capture(
    host: string,
    req: { ranks: CounterTarget[]; ownerUid: number; name: string },
    timeoutMs: number,
  ): Promise<Result<CaptureReply>>;
}

/** The agents can keep cores (the hub can; a fake may not). */
export function canCapture(a: WatchAgents): a is WatchAgents & CaptureAgents {
  return typeof (a as Partial<CaptureAgents>).capture === 'function';
}

/** The capture directory's name of one hang episode: `watch-<job key, sanitised>-<episode start ms>`. */
export function captureName(jobKey: string, episodeStart: number): string {
  const safe = jobKey
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 160);
  return `watch-${safe || 'job'}-${Math.max(0, Math.round(episodeStart))}`;
}

/** The fleet's record of a capture: per node its directory (or why none), per rank its core or why not. */
export function fleetCores(
  at: number,
  episodeStart: number,
  nodes: readonly { host: string; ranks: readonly CounterTarget[]; reply: Result<CaptureReply> }[],
): ApiFleetCores {
  const iso = (t: number) => new Date(t).toISOString();
  const dirs: ApiFleetCores['dirs'][number][] = [];
  const ranks: ApiFleetCores['ranks'][number][] = [];
  for (const n of nodes) {
    if (!n.reply.ok) {
      dirs.push({ host: n.host, dir: null, error: n.reply.error.message });
      for (const r of n.ranks)
        ranks.push({ rank: r.rank, host: n.host, core: null, bytes: 0, error: n.reply.error.message });
      continue;
    }
    dirs.push({ host: n.host, dir: n.reply.value.dir, error: null });
    for (const r of n.reply.value.ranks)
      ranks.push({
        rank: r.rank,
        host: n.host,
        core: r.core,
        bytes: r.bytes,
        error: r.error?.message ?? null,
      });
  }
  ranks.sort((a, b) => a.rank - b.rank);
  return { at: iso(at), episodeStart: iso(episodeStart), dirs, ranks };
}
