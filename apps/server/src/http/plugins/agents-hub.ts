// socket.io on the aggregator's HTTP server. /agents is served by the AgentHub (agent-protocol.ts);
// /ui is for browsers (logins and rooms in ui-sessions.ts). Auto-snapshots live here too,
// since they exist only while agents can answer.
import type { FastifyPluginAsync } from 'fastify';
import type { PluginOpts } from './common.js';

export const agentsHubPlugin: FastifyPluginAsync<PluginOpts> = async (app, { s }) => {
  // /ui logins and rooms: ui-sessions.ts (built with the services in app.ts).
  const ui = s.io.of('/ui');

  let auto: NodeJS.Timeout | null = null;
  if (s.config.autoSnapshotSeconds > 0) {
    auto = setInterval(() => {
      // Once per cluster: the instance holding the lease (any instance reaches every agent).
      if (!s.leases.holds('auto-snapshots')) return;
      s.snapshots.autoTick().catch((e: unknown) => app.log.error({ err: e }, 'auto-snapshot failed'));
    }, s.config.autoSnapshotSeconds * 1000);
    auto.unref();
  }

  app.addHook('preClose', async () => {
    if (auto) clearInterval(auto);
    // Agents and browsers hold upgraded connections the HTTP server would wait for forever.
    s.hub.close();
    // `local`: only this instance's browsers (they reconnect to another instance).
    ui.local.disconnectSockets(true);
    s.io.engine.close();
  });
};
