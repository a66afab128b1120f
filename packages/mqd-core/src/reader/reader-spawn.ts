// Starting a reader child, with node's builtins only, so that `mqd snapshot` can start the
// reader it will need before it loads its own code (apps/cli/src/main.ts): the CLI's node start
// and bundle load then overlap the reader's node start and bundle load instead of preceding them
// (the cold CLI). ReaderClient (client.ts) forks its reader here too, and adopts a started one
// of the same identity and entry if there is one. Nothing here reads a target: the child checks
// who it is and waits to be asked (reader-main.ts); one nobody adopts is killed when we exit.
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';

/** The uid/gid a reader child runs with. `switched`: the agent is root and forks it with them. */
export interface ReaderIdentity {
  readonly uid: number;
  readonly gid: number;
  readonly switched: boolean;
}

/** As whom the reader for processes of (uid, gid) runs: that owner when we are root, else ourselves. */
export function readerIdentity(uid: number, gid: number): ReaderIdentity {
  if (process.geteuid?.() === 0) return { uid, gid, switched: true };
  return { uid: process.getuid?.() ?? uid, gid: process.getgid?.() ?? gid, switched: false };
}

export const identityKey = (id: ReaderIdentity): string => `${id.uid}:${id.gid}:${id.switched ? 's' : '-'}`;

/**
 * The variables a child that handles a user's job inherits from us, by name or prefix; nothing
 * else. The agent runs as root with its credentials in its environment (MQD_ADMIN_TOKEN,
 * MQD_AGENT_TOKEN, ...), and its children run the user's code (the MQD DLL, libompd, PMIx) as the
 * user: what they get is theirs to read.
 *   PATH, LANG/LANGUAGE/LC_*, TZ: how any program runs;
 *   TMPDIR, PMIX_SYSTEM_TMPDIR, PMIX_SERVER_TMPDIR, PMIX_MCA_*: where and how a PMIx tool finds
 *     the launcher's rendezvous files (native/pmix.ts, in the locate child), as the site set them;
 *   MQD_DEBUG, MQD_DEBUGINFO_PATH: the reader's own debug settings (mqs/session.ts, inferior/debug-file.ts).
 * NODE_OPTIONS is not passed: the children's node flags are their execArgv (readerEntry).
 */
const CHILD_ENV_NAMES: ReadonlySet<string> = new Set([
  'PATH',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  'PMIX_SYSTEM_TMPDIR',
  'PMIX_SERVER_TMPDIR',
  'MQD_DEBUG',
  'MQD_DEBUGINFO_PATH',
]);
const CHILD_ENV_PREFIXES: readonly string[] = ['LC_', 'PMIX_MCA_'];

/**
 * The environment of a child spawned for a user's job: the allow-listed variables of `from`,
 * then `extra`. Every spawn or fork of such a child takes its environment from here.
 */
export function childEnv(
  extra: Readonly<Record<string, string>> = {},
  from: NodeJS.ProcessEnv = process.env,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(from)) {
    if (value === undefined) continue;
    if (CHILD_ENV_NAMES.has(name) || CHILD_ENV_PREFIXES.some((p) => name.startsWith(p))) env[name] = value;
  }
  env['PATH'] ??= '/usr/bin:/bin';
  return { ...env, ...extra };
}

/** fork() options and environment that give the child `id` (libuv drops supplementary groups too). */
export function readerForkOptions(id: ReaderIdentity): {
  uid?: number;
  gid?: number;
  env: NodeJS.ProcessEnv;
} {
  const env = childEnv({
    MQD_READER_UID: String(id.uid),
    MQD_READER_GID: String(id.gid),
    MQD_READER_SWITCHED: id.switched ? '1' : '0',
    // Who its parent must be once it set PR_SET_PDEATHSIG (reader-main.ts): a parent that died
    // before then left it reparented to a subreaper or init, which it checks for.
    MQD_READER_PARENT: String(process.pid),
    // One malloc arena: with glibc's default (8 per core) the blocks of IPC buffers, libdw and
    // koffi calls spread over arenas of several threads and the reader's RSS climbs ~20 MB over
    // 1,000 snapshots without any leak; with one it stays flat (packages/mqd-core/bench/reader-memory.bench.ts).
    MALLOC_ARENA_MAX: '1',
  });
  return id.switched ? { uid: id.uid, gid: id.gid, env } : { env };
}

/**
 * V8 flags of the readers. Every snapshot allocates short-lived records (a deep queue: tens of
 * MB); with the default young generation V8 grows it step by step up to 16 MB per semi-space, and
 * its old generation for hundreds of snapshots before a full collection, so the reader's RSS
 * climbs ~20-60 MB and falls back. A small young generation, and a full collection when the
 * reader is idle and its heap grew (reader-main.ts collectIfGrown), keep it flat
 * (packages/mqd-core/bench/reader-memory.bench.ts: no native growth, measured with a collection after each request).
 */
const READER_V8_FLAGS = ['--max-semi-space-size=2', '--expose-gc'];

/** The reader's entry file and the node flags it runs with. */
export function readerEntry(): { file: string; execArgv: string[] } {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.ts')) {
    // Running from sources (tests): load the TypeScript reader through tsx.
    return {
      file: here.replace(/reader-spawn\.ts$/, 'reader-main.ts'),
      execArgv: [...READER_V8_FLAGS, '--conditions=source', '--import', 'tsx'],
    };
  }
  const js = here.replace(/reader-spawn\.js$/, 'reader-main.js');
  if (!existsSync(js)) throw new Error(`reader entry ${js} is missing: run npm run build`);
  return { file: js, execArgv: READER_V8_FLAGS };
}

/** Forks a reader child that runs as `id` (its stderr piped, IPC with structured clone). */
export function forkReader(id: ReaderIdentity, entry = readerEntry()): ChildProcess {
  const { file, execArgv } = entry;
  return fork(file, [], {
    execArgv,
    serialization: 'advanced',
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    ...readerForkOptions(id),
  });
}

/** A reader started ahead of its ReaderClient: what it said and whether it ended meanwhile. */
export interface StartedReader {
  readonly child: ChildProcess;
  readonly entry: string;
  /** Messages it sent before it was adopted, in order. */
  readonly messages: unknown[];
  /** Set when it exited before it was adopted. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
}

interface Pending extends StartedReader {
  readonly onMessage: (m: unknown) => void;
  readonly onExit: (code: number | null, signal: NodeJS.Signals | null) => void;
}

// One registry per process, shared by every copy of this module (the CLI's main.js and the
// snapshot command's bundle each carry one).
const REGISTRY = Symbol.for('mqd.startedReaders');
function registry(): Map<string, Pending> {
  const g = globalThis as { [REGISTRY]?: Map<string, Pending> };
  g[REGISTRY] ??= new Map();
  return g[REGISTRY];
}

const entryKey = (id: ReaderIdentity, entry: { file: string; execArgv: string[] }) =>
  `${identityKey(id)}|${entry.file}|${entry.execArgv.join(' ')}`;

/**
 * Starts a reader for `id` now, for a ReaderClient of this process to adopt. It does not keep this
 * process alive, and is killed at exit if nobody adopted it. Returns the child, or null when
 * it could not be started (the ReaderClient then forks its own) or one is already waiting.
 */
export function startReaderEarly(id: ReaderIdentity): ChildProcess | null {
  const entry = readerEntry();
  const key = entryKey(id, entry);
  const reg = registry();
  if (reg.has(key)) return null;
  let child: ChildProcess;
  try {
    child = forkReader(id, entry);
  } catch {
    return null;
  }
  const p: Pending = {
    child,
    entry: entry.file,
    messages: [],
    exit: null,
    onMessage: (m) => p.messages.push(m),
    onExit: (code, signal) => {
      p.exit = { code, signal };
    },
  };
  child.on('message', p.onMessage);
  child.on('exit', p.onExit);
  child.on('error', () => undefined); // a failed fork shows as its exit
  // Neither the child, its IPC channel nor its stderr pipe keeps this process alive until adopted.
  child.unref();
  child.channel?.unref();
  (child.stderr as Socket | null)?.unref();
  reg.set(key, p);
  process.once('exit', () => {
    if (reg.get(key) === p) child.kill('SIGKILL');
  });
  return child;
}

/** The reader started early for `id` (same entry and flags), now the caller's; else null. */
export function adoptStartedReader(id: ReaderIdentity): StartedReader | null {
  const key = entryKey(id, readerEntry());
  const reg = registry();
  const p = reg.get(key);
  if (!p) return null;
  reg.delete(key);
  p.child.off('message', p.onMessage);
  p.child.off('exit', p.onExit);
  p.child.ref();
  p.child.channel?.ref();
  (p.child.stderr as Socket | null)?.ref();
  return p;
}

/**
 * The reader a snapshot of `pid` will need, as the Snapshotter picks it for a command-line read
 * (the process's real uid and gid when we are root, else ourselves); null when `pid` is gone.
 */
export function readerIdentityOfPid(pid: number): ReaderIdentity | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    const gid = /^Gid:\s+(\d+)/m.exec(status)?.[1];
    return uid !== undefined && gid !== undefined ? readerIdentity(Number(uid), Number(gid)) : null;
  } catch {
    return null;
  }
}
