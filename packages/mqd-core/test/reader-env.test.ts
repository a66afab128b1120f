// Root's environment never reaches a user's code. The agent runs as root with
// its credentials in its environment (MQD_ADMIN_TOKEN, MQD_AGENT_TOKEN, MQD_METRICS_TOKEN, as
// `mqd serve --help` used to offer); a user (uid 65534 via setpriv) runs a process that looks like
// a rank and names their own library, whose constructor writes the environment it was given to a
// file of theirs. Children get an allow-listed environment: none of it may be there.
import { once } from 'node:events';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ReaderClient } from '../src/reader/client.js';
import { childEnv, readerForkOptions, readerIdentity, startReaderEarly } from '../src/reader/reader-spawn.js';
import { Snapshotter } from '../src/snapshotter.js';
import { buildConformance, killAllTargets, startTarget } from './conformance-kit.js';
import { type Attacker, buildAttacker, NOBODY, startProcess } from './security-kit.js';

const SECRETS = {
  MQD_ADMIN_TOKEN: 'admin-secret-0123456789abcdef-env-test',
  MQD_AGENT_TOKEN: 'agent-secret-0123456789abcdef-env-test',
  MQD_METRICS_TOKEN: 'metrics-secret-0123456789abcdef-env-test',
  MQD_AGENT_SECRET: 'hmac-secret-0123456789abcdef-env-test',
};
const SECRET_NAME = /^MQD_\w*(TOKEN|SECRET)/;

describe('the allow-list of a child’s environment', () => {
  const from: NodeJS.ProcessEnv = {
    ...SECRETS,
    PATH: '/opt/x/bin:/usr/bin',
    LANG: 'C.UTF-8',
    LC_ALL: 'C',
    TZ: 'UTC',
    TMPDIR: '/scratch/tmp',
    PMIX_MCA_ptl_tcp_if_include: 'ib0',
    MQD_DEBUG: 'dll',
    MQD_DEBUGINFO_PATH: '/opt/debug',
    HOME: '/root',
    NODE_OPTIONS: '--require /tmp/x.js',
    LD_PRELOAD: '/tmp/evil.so',
    AWS_SECRET_ACCESS_KEY: 'aws',
    MQD_DATA_DIR: '/var/lib/mqd',
  };

  it('keeps what a reader needs and nothing else', () => {
    expect(childEnv({}, from)).toEqual({
      PATH: '/opt/x/bin:/usr/bin',
      LANG: 'C.UTF-8',
      LC_ALL: 'C',
      TZ: 'UTC',
      TMPDIR: '/scratch/tmp',
      PMIX_MCA_ptl_tcp_if_include: 'ib0',
      MQD_DEBUG: 'dll',
      MQD_DEBUGINFO_PATH: '/opt/debug',
    });
    expect(childEnv({ X: '1' }, {})).toEqual({ PATH: '/usr/bin:/bin', X: '1' });
  });

  it("the readers' and locate children's fork options carry their identity, never a secret of this process", () => {
    const saved = { ...process.env };
    Object.assign(process.env, SECRETS);
    try {
      const { env, uid, gid } = readerForkOptions({ uid: NOBODY, gid: NOBODY, switched: true });
      expect({ uid, gid }).toEqual({ uid: NOBODY, gid: NOBODY });
      expect(env).toMatchObject({
        MQD_READER_UID: String(NOBODY),
        MQD_READER_GID: String(NOBODY),
        MQD_READER_SWITCHED: '1',
        MALLOC_ARENA_MAX: '1',
      });
      expect(Object.keys(env).filter((k) => SECRET_NAME.test(k))).toEqual([]);
      expect(Object.values(env)).not.toContain(SECRETS.MQD_ADMIN_TOKEN);
    } finally {
      for (const k of Object.keys(SECRETS)) if (!(k in saved)) delete process.env[k];
    }
  });
});

describe("root's reader with the three tokens in its environment, attacked by uid 65534", () => {
  let a: Attacker;
  const saved: Record<string, string | undefined> = {};
  beforeAll(() => {
    expect(process.getuid?.()).toBe(0); // a root agent
    a = buildAttacker();
    for (const [k, v] of Object.entries(SECRETS)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  afterEach(() => killAllTargets());
  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    a?.dispose();
  });

  it("a reader's and an early reader's real environment (/proc/PID/environ) holds none of them", async () => {
    const me = readerIdentity(process.getuid?.() ?? 0, process.getgid?.() ?? 0);
    const expectClean = (pid: number) => {
      const env = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').filter(Boolean);
      expect(env.some((l) => l.startsWith('MQD_READER_UID='))).toBe(true);
      expect(env.filter((l) => SECRET_NAME.test(l))).toEqual([]);
    };
    // Each is read once it has said something: past its exec, its environment is its own.
    const early = startReaderEarly(me);
    const adopter = new ReaderClient(null, {}, me);
    const own = new ReaderClient(null, {}, me);
    try {
      if (!early?.pid) throw new Error('no early reader');
      await once(early, 'message');
      expectClean(early.pid);
      adopter.warmUp(); // adopts it (and kills it at dispose)
      await own.resolve([{ pid: process.pid, ownerUid: process.getuid?.() ?? 0, allowRoot: true }]);
      const pid = own.hostPid ?? 0;
      expect(pid).not.toBe(early.pid);
      expectClean(pid);
    } finally {
      await adopter.dispose();
      await own.dispose();
    }
  });

  it("the user's library sees none of root's secrets, and the reader still reads", async () => {
    rmSync(a.out, { force: true });
    rmSync(a.envOut, { force: true });
    const rank = await startProcess([a.rank, a.evilEnv], { env: { OMPI_COMM_WORLD_RANK: '0' } });
    const s = new Snapshotter();
    try {
      const { snapshot } = await s.snapshot([{ pid: rank.pid }], { ownerUid: NOBODY });
      // The library was loaded by the user's reader (its constructor ran) and it is no DLL.
      expect(snapshot.ranks[0]?.state.kind).toBe('error');
      expect(readFileSync(a.out, 'utf8').trim()).toBe(`euid=${NOBODY} uid=${NOBODY}`);
      expect(existsSync(a.envOut)).toBe(true);
      const environ = readFileSync(a.envOut, 'utf8').split('\n').filter(Boolean);
      expect(environ.some((l) => l.startsWith('MQD_READER_UID='))).toBe(true); // the dump is real
      expect(environ.filter((l) => SECRET_NAME.test(l))).toEqual([]);
      for (const secret of Object.values(SECRETS)) expect(environ.join('\n')).not.toContain(secret);
      // The same process, with the same environment, reads a real target.
      const conf = buildConformance();
      const t = await startTarget(conf.target, conf.dll, 0, 0);
      const read = await s.snapshot([{ pid: t.pid, rank: 0 }], { dll: conf.dll });
      expect(read.snapshot.ranks[0]?.state.kind).toBe('ok');
    } finally {
      await s.dispose();
      rank.kill();
    }
  });
});
