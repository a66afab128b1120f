// The import rules of the server's rooms (scripts/check-imports.mjs), run as CI runs them: the
// real checker as a child process, on this checkout and on a copy of it where one file breaks a
// rule. The copy holds the server's sources and every checked package's package.json: all the
// checker needs to judge apps/server/src.
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const checker = join(repo, 'scripts/check-imports.mjs');
const PACKAGES = [
  'packages/model',
  'apps/web',
  'packages/mqd-core',
  'packages/mpir',
  'packages/testkit',
  'apps/server',
  'apps/cli',
  'e2e',
];

function check(root?: string): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, root === undefined ? [checker] : [checker, root], {
    encoding: 'utf8',
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('the rooms of apps/server', () => {
  let copy = '';
  beforeEach(() => {
    copy = mkdtempSync(join(tmpdir(), 'mqd-rooms-'));
    for (const p of PACKAGES) {
      mkdirSync(join(copy, p), { recursive: true });
      writeFileSync(join(copy, p, 'package.json'), readFileSync(join(repo, p, 'package.json')));
    }
    cpSync(join(repo, 'apps/server/src'), join(copy, 'apps/server/src'), { recursive: true });
  });
  afterEach(() => {
    rmSync(copy, { recursive: true, force: true });
  });

  it("the server's sources as they are pass", () => {
    const same = check(copy);
    expect(same.out).toContain("apps/server's 11 rooms follow theirs");
    expect(same.status).toBe(0);
    // The whole checkout: whatever else it reports, nothing under the server's sources.
    expect(check().out).not.toMatch(/apps\/server\/src\/\S+: /);
  });

  it('fails when an agent file imports the store, naming the file, the import and the rule', () => {
    appendFileSync(
      join(copy, 'apps/server/src/agent/agent.ts'),
      "\nexport type { StorePort } from '../store/store-port.js';\n",
    );
    const r = check(copy);
    expect(r.status).toBe(1);
    expect(r.out).toContain('MQD_E_IMPORT_DIRECTION: 1 import(s) break the dependency direction');
    expect(r.out).toContain(
      "apps/server/src/agent/agent.ts: '../store/store-port.js' is in the store room, which the agent room may not import (the agent's side never imports the aggregator); it may import only: shared, protocol",
    );
  });

  it("fails when the agent's entry or the protocol reaches the aggregator's rooms or packages", () => {
    appendFileSync(
      join(copy, 'apps/server/src/agent-entry.ts'),
      "\nexport { buildApp } from './http/app.js';\n",
    );
    appendFileSync(
      join(copy, 'apps/server/src/agent-entry.ts'),
      "\nexport type { FastifyInstance } from 'fastify';\n",
    );
    appendFileSync(
      join(copy, 'apps/server/src/protocol/agent-protocol.ts'),
      "\nexport type { Namespace } from 'socket.io';\n",
    );
    appendFileSync(
      join(copy, 'apps/server/src/shared/seams.ts'),
      "\nimport type Database from 'better-sqlite3';\n",
    );
    const r = check(copy);
    expect(r.status).toBe(1);
    expect(r.out).toContain('MQD_E_IMPORT_DIRECTION: 4 import(s)');
    expect(r.out).toContain(
      "apps/server/src/agent-entry.ts: './http/app.js' is in the http room, which agent-entry.ts may not import (the agent's side never imports the aggregator)",
    );
    expect(r.out).toContain("apps/server/src/agent-entry.ts: 'fastify' is the aggregator's");
    expect(r.out).toContain("apps/server/src/protocol/agent-protocol.ts: 'socket.io' is the aggregator's");
    expect(r.out).toContain("apps/server/src/shared/seams.ts: 'better-sqlite3' is the aggregator's");
  });

  it("fails when the agent a node runs would load the synthetic agents' fakes", () => {
    appendFileSync(
      join(copy, 'apps/server/src/agent/agent.ts'),
      "\nexport { createFakeReader } from '../synthetic/fakes.js';\n",
    );
    const r = check(copy);
    expect(r.status).toBe(1);
    expect(r.out).toContain(
      "apps/server/src/agent/agent.ts: '../synthetic/fakes.js' is in the synthetic room, which the agent room may not import; it may import only: shared, protocol",
    );
  });

  it('fails when a lower room of the aggregator imports a higher one, or a file lives in no room', () => {
    appendFileSync(
      join(copy, 'apps/server/src/store/store-port.ts'),
      "\nexport type { AgentHub } from '../hub/hub.js';\n",
    );
    mkdirSync(join(copy, 'apps/server/src/misc'));
    writeFileSync(
      join(copy, 'apps/server/src/misc/x.ts'),
      "export { KeyedLock } from '../shared/lock.js';\n",
    );
    const r = check(copy);
    expect(r.status).toBe(1);
    expect(r.out).toContain(
      "apps/server/src/store/store-port.ts: '../hub/hub.js' is in the hub room, which the store room may not import; it may import only: shared",
    );
    expect(r.out).toContain(
      "apps/server/src/misc/x.ts: 'misc' is no room of apps/server/src: add it to SERVER_ROOMS",
    );
  });
});
