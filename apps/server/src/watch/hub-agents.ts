// The agent hub as the watcher's WatchAgents. The hub gains discovery reports and /proc
// counters with the agents' discovery (apps/server/src/hub.ts); a hub without them answers
// with MQD_E_INTERNAL (the watcher logs it and knows no jobs) instead of failing to start.
import { err, MqdException, mqdError } from '@mqd/model';
import type { AgentHub } from '../hub.js';
import type { WatchAgents } from './source.js';

export function hubWatchAgents(hub: AgentHub): WatchAgents {
  const h = hub as unknown as Partial<Pick<WatchAgents, 'discovered' | 'counters'>>;
  const missing = () => mqdError('MQD_E_INTERNAL', 'hub has no discovery: this aggregator cannot watch jobs');
  return {
    discovered: () => {
      if (typeof h.discovered !== 'function') throw new MqdException(missing());
      return h.discovered.call(hub);
    },
    counters: (host, req, timeoutMs) =>
      typeof h.counters === 'function'
        ? h.counters.call(hub, host, req, timeoutMs)
        : Promise.resolve(err(missing())),
    isConnected: (host) => hub.isConnected(host),
  };
}
