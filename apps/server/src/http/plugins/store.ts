// The store's lifecycle inside the app: the age part of retention runs hourly even when no
// snapshot is taken (the count part runs on every insert), and the store closes with the app.
import type { FastifyPluginAsync } from 'fastify';
import type { PluginOpts } from './common.js';

const SWEEP_MS = 3600_000;

export const storePlugin: FastifyPluginAsync<PluginOpts & { ownsStore: boolean }> = async (
  app,
  { s, ownsStore },
) => {
  const timer = setInterval(() => {
    if (!s.leases.holds('retention')) return;
    s.store.sweep().then(
      (removed) => {
        if (removed > 0) app.log.info({ removed }, 'retention removed old snapshots');
      },
      // A read-only store (disk full) skips the sweep; anything else is a bug and is logged.
      (e: unknown) => app.log.error({ err: e }, 'retention sweep failed'),
    );
  }, SWEEP_MS);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    if (ownsStore) await s.store.close();
  });
};
