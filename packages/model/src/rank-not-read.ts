// The one way to say "this rank has no data": a RankSnapshot with a coded state and no
// communicators. Used by the DLL session, its supervisor, the agent, the aggregator's merge and
// the CLI's reader, so every such rank looks the same and fits the schema.
import type { MqdError } from './errors.js';
import type { RankSnapshot } from './snapshot-spec.js';

/** RankState.message is at most this long (snapshot-spec.ts). */
const MAX_MESSAGE = 4096;

export function rankNotRead(
  t: { readonly rank: number; readonly pid: number; readonly host: string },
  error: MqdError,
  kind: 'error' | 'no-queues' | 'agent-missing' = 'error',
  pausedMicros: number | null = null,
): RankSnapshot {
  return {
    rank: t.rank,
    pid: t.pid,
    host: t.host,
    state: { kind, code: error.code, message: error.message.slice(0, MAX_MESSAGE) },
    pausedMicros,
    communicators: [],
  };
}
