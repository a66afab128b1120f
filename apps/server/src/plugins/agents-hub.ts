// socket.io on the aggregator's HTTP server. /agents is served by the AgentHub (agent-protocol.ts);
// /ui is for browsers: the same login as the REST API, and each socket joins the rooms of what
// its user may see (its uid's jobs, or everything for admins). Auto-snapshots live here too,
// since they exist only while agents can answer.
import type { FastifyPluginAsync } from 'fastify';
import type { PluginOpts } from './common.js';

export const agentsHubPlugin: FastifyPluginAsync<PluginOpts> = async (app, { s }) => {
  const ui = s.io.of('/ui');
  ui.use((socket, next) => {
    const token = (socket.handshake.auth as Record<string, unknown> | undefined)?.['token'];
    const headers = {
      ...socket.handshake.headers,
      ...(typeof token === 'string' ? { authorization: `Bearer ${token}` } : {}),
    };
    const user = s.auth.fromHeaders(headers, socket.conn.remoteAddress);
    if (!user.ok)
      return next(Object.assign(new Error(user.error.message), { data: { code: user.error.code } }));
    socket.data = { user: user.value };
    next();
  });
  ui.on('connection', (socket) => {
    const { user } = socket.data as { user: { admin: boolean; uid: number | null } };
    if (user.admin) void socket.join('admins');
    if (user.uid !== null) void socket.join(`uid:${user.uid}`);
  });

  let auto: NodeJS.Timeout | null = null;
  if (s.config.autoSnapshotSeconds > 0) {
    auto = setInterval(() => {
      s.snapshots.autoTick().catch((e: unknown) => app.log.error({ err: e }, 'auto-snapshot failed'));
    }, s.config.autoSnapshotSeconds * 1000);
    auto.unref();
  }

  app.addHook('preClose', async () => {
    if (auto) clearInterval(auto);
    // Agents and browsers hold upgraded connections the HTTP server would wait for forever.
    s.hub.close();
    ui.disconnectSockets(true);
    s.io.engine.close();
  });
};
