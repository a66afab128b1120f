import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/http/config.js';
import { serve } from '../src/http/serve.js';
import { createFakeLocator, createFakeReader } from '../src/synthetic/fakes.js';
import { waitFor } from './helpers.js';

describe('serve', () => {
  it('listens, prints a login URL that works, and runs an in-process agent for this node', async () => {
    const cfg = loadConfig({ argv: ['--port', '0', '--data-dir', ':memory:'] });
    if (!cfg.ok) throw new Error(cfg.error.message);
    const lines: string[] = [];
    const job = {
      starterPid: 31,
      uid: 0,
      command: 'mpirun -np 2 ./a.out',
      hosts: ['local'],
      ranksPerHost: 2,
    };
    const served = await serve({
      config: cfg.value,
      reader: createFakeReader({ worldSize: 2 }),
      locator: createFakeLocator(job),
      localHost: 'local',
      print: (l) => lines.push(l),
    });
    try {
      const login = lines.find((l) => l.includes('?token='))?.trim() ?? '';
      expect(login).toBe(served.loginUrl);
      const token = new URL(login).searchParams.get('token') ?? '';
      expect(token).toBe(served.adminToken);
      // The agent secret itself is never printed (per-node tokens are derived from it).
      expect(lines.some((l) => l.includes(served.agentToken))).toBe(false);
      expect(lines.some((l) => l.includes('mqd agent-token --host'))).toBe(true);
      const res = await fetch(`${served.url}/api/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token }),
      });
      expect(res.status).toBe(200);
      await served.agent?.whenConnected();
      await waitFor(() => served.app.mqd.hub.seenStarters().length === 1, "the local agent's starter");
      const attach = await fetch(`${served.url}/api/jobs/attach`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ starterPid: 31 }),
      });
      expect(attach.status).toBe(201);
    } finally {
      await served.close();
    }
  });
});
