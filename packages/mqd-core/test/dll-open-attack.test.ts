// The DLL a rank names, attacked by its owner (uid 65534 via setpriv) against a root reader:
// MPIR_dll_name is the user's memory, so it may name a FIFO (whose open() waits for a writer that
// never comes), a directory, a device, a link to a FIFO or a huge file. Each is refused at once
// with a coded error, by one reader that is never restarted; a reader that is busy in a DLL (a
// constructor blocked on a FIFO, where no O_NONBLOCK can help) is killed by dispose() and none is
// started after it; and a reader never outlives its parent.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chownSync,
  closeSync,
  copyFileSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RankSnapshot } from '@mqd/model';
import { done, identify, isRunning, liveDescendants, pending, readStat, waitFor } from '@mqd/testkit';
import koffi from 'koffi';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MAX_LIBRARY_BYTES, openLibraryFile } from '../src/inferior/library-file.js';
import { readerEntry, readerForkOptions, readerIdentity } from '../src/reader/reader-spawn.js';
import { Snapshotter } from '../src/snapshotter.js';
import { buildConformance } from './conformance-kit.js';
import { type BlockingDll, buildBlockingDll } from './dll-attack-kit.js';
import { type Attacker, buildAttacker, NOBODY, type Started, startProcess } from './security-kit.js';

const CLIENT_TS = fileURLToPath(new URL('../src/reader/client.ts', import.meta.url));
const SNAPSHOTTER_TS = fileURLToPath(new URL('../src/snapshotter.ts', import.meta.url));

let a: Attacker;
let blocking: BlockingDll;
let fifo: string;
let blockingDll: string;

const asAttacker = (argv: readonly string[]) =>
  execFileSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', ...argv]);

beforeAll(() => {
  expect(process.getuid?.()).toBe(0); // a root agent, attacked by uid 65534
  a = buildAttacker();
  buildConformance(); // the native hot path a reader loads with any DLL
  blocking = buildBlockingDll(a);
  fifo = blocking.fifo;
  blockingDll = blocking.dll;
});
afterAll(() => a?.dispose());

const ranks: Started[] = [];
const children: ChildProcess[] = [];
afterEach(() => {
  for (const r of ranks.splice(0)) r.kill();
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

async function rankNaming(dll: string): Promise<Started> {
  const r = await startProcess([a.rank, dll], { env: { OMPI_COMM_WORLD_RANK: '0' } });
  ranks.push(r);
  return r;
}

function errorOf(r: RankSnapshot | undefined): { code: string; message: string } {
  if (r?.state.kind !== 'error') throw new Error(`rank not refused: ${JSON.stringify(r?.state)}`);
  return { code: r.state.code, message: r.state.message };
}

const enteredPids = () => blocking.enteredPids();

/** Live processes of ours that run the reader's entry. */
function readerChildren(): number[] {
  return liveDescendants(process.pid).filter((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'latin1').includes('reader-main');
    } catch {
      return false;
    }
  });
}

const gone = (pid: number, what: string) => {
  const id = identify(pid);
  return waitFor(() => (id === undefined || !isRunning(id) ? done(pid) : pending(readStat(pid)?.state)), {
    timeoutMs: 20_000,
    what,
  });
};

describe('MPIR_dll_name names something that is not a library', () => {
  const cases: [string, () => string, RegExp][] = [
    ['a FIFO', () => fifo, /is a FIFO, not a regular file/],
    [
      'a symlink to a FIFO',
      () => {
        const link = join(a.dir, 'libfifo.so');
        asAttacker(['ln', '-sf', fifo, link]);
        return link;
      },
      /is a FIFO, not a regular file/,
    ],
    [
      'a directory',
      () => {
        const d = join(a.dir, 'libdir.so');
        mkdirSync(d, { recursive: true });
        chownSync(d, NOBODY, NOBODY);
        return d;
      },
      /is a directory, not a regular file/,
    ],
    ['/dev/zero', () => '/dev/zero', /is a device, not a regular file/],
    [
      `a sparse ELF file larger than ${MAX_LIBRARY_BYTES} bytes`,
      () => {
        // A real shared object's bytes at its start, then a hole up to past the cap.
        const big = join(a.dir, 'libhuge.so');
        copyFileSync(a.evil, big);
        const fd = openSync(big, 'r+');
        ftruncateSync(fd, MAX_LIBRARY_BYTES + 4096);
        closeSync(fd);
        chownSync(big, NOBODY, NOBODY);
        return big;
      },
      new RegExp(`larger than the ${MAX_LIBRARY_BYTES} bytes`),
    ],
  ];

  it.each(cases)('%s: a coded refusal from one reader, never restarted', async (_what, make, why) => {
    const dll = make();
    const rank = await rankNaming(dll);
    const s = new Snapshotter();
    try {
      const { snapshot, stats } = await s.snapshot([{ pid: rank.pid }], { ownerUid: NOBODY });
      const e = errorOf(snapshot.ranks[0]);
      expect(e.code).toBe('MQD_E_DLL_NOT_ELF');
      expect(e.message).toContain(dll);
      expect(e.message).toMatch(why);
      // One reader resolved the name and refused the file; it was never replaced (a reader
      // blocked in open() was killed after the rank timeout and started again, over and over).
      expect(stats.restarts).toBe(0);
      expect(stats.hostStarts).toBe(1);
      // The same reader still answers (it did not wedge): it resolves the name again.
      const [host] = s.hostPids();
      expect(host).toBeDefined();
      expect(await s.dllOf(rank.pid)).toEqual({ ok: true, value: dll });
      expect(s.hostPids()).toEqual([host]);
    } finally {
      await s.dispose();
    }
  });
});

describe('a reader busy in a DLL that never returns', () => {
  it('dispose() kills it, answers the read with a coded error and starts no other reader', async () => {
    const before = enteredPids().length;
    const rank = await rankNaming(blockingDll);
    const s = new Snapshotter();
    try {
      const read = s.snapshot([{ pid: rank.pid }], { ownerUid: NOBODY });
      // The reader is inside the constructor, blocked in open() on the FIFO.
      const host = await waitFor(
        () => {
          const p = enteredPids()[before];
          return p !== undefined ? done(p) : pending();
        },
        { timeoutMs: 30_000, what: 'the DLL constructor to run in a reader' },
      );
      expect(readStat(host)?.state).toBe('S');
      await s.dispose();
      const { snapshot } = await read;
      expect(errorOf(snapshot.ranks[0]).code).toBe('MQD_E_AGENT_MISSING');
      expect(errorOf(snapshot.ranks[0]).message).toMatch(/shutting down/);
      await gone(host, `reader ${host} to end`);
      // Nothing started since: no reader child of ours, no second pass through the constructor.
      expect(readerChildren()).toEqual([]);
      expect(enteredPids().length).toBe(before + 1);
      // Asked again after dispose: answered at once, still without a reader.
      const again = await s.snapshot([{ pid: rank.pid }], { ownerUid: NOBODY });
      expect(errorOf(again.snapshot.ranks[0]).code).toBe('MQD_E_AGENT_MISSING');
      expect(again.stats.hostStarts).toBe(0);
      expect(enteredPids().length).toBe(before + 1);
    } finally {
      await s.dispose(); // again, if the test failed before it did
    }
  });
});

/** A node process from the sources that runs `body` (ESM, top-level await) and prints what it says. */
function nodeChild(body: string): { child: ChildProcess; line: (re: RegExp) => Promise<RegExpExecArray> } {
  const child = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', '--input-type=module', '-e', body],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const line = (re: RegExp) =>
    waitFor(
      () => {
        const m = re.exec(out);
        if (m) return done(m);
        return child.exitCode !== null
          ? { state: 'failed', reason: `exited ${child.exitCode}: ${out}` }
          : pending();
      },
      { timeoutMs: 40_000, what: `${re} from the child` },
    );
  return { child, line };
}

describe('a reader never outlives its parent', () => {
  it('its parent SIGKILLed while the reader is blocked in a DLL: the reader ends too', async () => {
    const before = enteredPids().length;
    const rank = await rankNaming(blockingDll);
    const { child } = nodeChild(`
      import { Snapshotter } from ${JSON.stringify(SNAPSHOTTER_TS)};
      const s = new Snapshotter();
      void s.snapshot([{ pid: ${rank.pid} }], { ownerUid: ${NOBODY} });
      setInterval(() => {}, 1000);
    `);
    const host = await waitFor(
      () => {
        const p = enteredPids()[before];
        return p !== undefined ? done(p) : pending();
      },
      { timeoutMs: 40_000, what: 'the DLL constructor to run in the child’s reader' },
    );
    expect(readStat(host)?.ppid).toBe(child.pid);
    expect(readStat(host)?.state).toBe('S');
    child.kill('SIGKILL');
    await gone(host, `reader ${host} to end with its parent`);
  });

  it('a reader whose parent is not the one it was started by exits before it says anything', async () => {
    // Forked with MQD_READER_PARENT naming another process: what a reader sees when its parent
    // died before PR_SET_PDEATHSIG was set and it was reparented (to init or a subreaper).
    const { file, execArgv } = readerEntry();
    const me = readerIdentity(process.getuid?.() ?? 0, process.getgid?.() ?? 0);
    const opts = readerForkOptions(me);
    const { fork } = await import('node:child_process');
    const reader = fork(file, [], {
      execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      ...opts,
      env: { ...opts.env, MQD_READER_PARENT: String(process.ppid) },
    });
    children.push(reader);
    const said: unknown[] = [];
    reader.on('message', (m) => said.push(m));
    const code = await new Promise<number | null>((resolve) => reader.once('exit', (c) => resolve(c)));
    expect(code).toBe(1);
    expect(said).toEqual([]);
  });

  it('the same reader with its real parent named says ready (the check above is the parent, nothing else)', async () => {
    const { child, line } = nodeChild(`
      import { ReaderClient } from ${JSON.stringify(CLIENT_TS)};
      const c = new ReaderClient(null);
      await c.resolve([]);
      process.stdout.write('HOST ' + c.hostPid + '\\n');
      await c.dispose();
    `);
    const m = await line(/HOST (\d+)/);
    expect(Number(m[1])).toBeGreaterThan(0);
    await new Promise<void>((r) => (child.exitCode !== null ? r() : child.once('exit', () => r())));
    expect(child.exitCode).toBe(0);
  });
});

describe('what the checks saw is what the loader loads', () => {
  let dir: string;
  const cc = (args: string[]) => execFileSync('cc', ['-shared', '-fPIC', ...args], { stdio: 'pipe' });
  /** A library in `dir` whose `which()` answers `n`. */
  const lib = (name: string, n: number, extra: string[] = []) => {
    const c = join(dir, `${name}.c`);
    writeFileSync(
      c,
      `int which(void) { return ${n}; }\nint dep(void);\nint viaDep(void) { return ${extra.length ? 'dep()' : '0'}; }\n`,
    );
    cc(['-o', join(dir, name), c, ...extra]);
    return join(dir, name);
  };
  beforeAll(() => {
    dir = mkdtempSync('/tmp/mqd-libfile-');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a library swapped in at the path after the checks is not the one loaded', () => {
    const checked = lib('libswap.so', 1);
    const other = lib('libother.so', 2);
    const held = openLibraryFile(checked);
    if (!held.ok) throw new Error(held.error.why);
    expect(held.value.loadPath).toMatch(/^\/proc\/self\/fd\/\d+$/);
    renameSync(other, checked); // the owner replaces the file between the checks and dlopen
    const which = koffi.load(held.value.loadPath).func('int which()') as () => number;
    expect(which()).toBe(1);
  });

  it("a library whose RUNPATH is $ORIGIN finds its neighbour through the held directory (libompd's case)", () => {
    const depC = join(dir, 'dep.c');
    writeFileSync(depC, 'int dep(void) { return 7; }\n');
    cc(['-o', join(dir, 'libneighbour.so'), depC]);
    const top = lib('libtop.so', 3, [`-L${dir}`, '-lneighbour', '-Wl,-rpath,$ORIGIN']);
    const viaFile = openLibraryFile(top, 'file');
    if (!viaFile.ok) throw new Error(viaFile.error.why);
    // Through its own descriptor $ORIGIN is /proc/self/fd: the neighbour is not found.
    expect(() => koffi.load(viaFile.value.loadPath)).toThrow(/libneighbour\.so/);
    const viaDir = openLibraryFile(top, 'directory');
    if (!viaDir.ok) throw new Error(viaDir.error.why);
    expect(viaDir.value.loadPath).toMatch(/^\/proc\/self\/fd\/\d+\/libtop\.so$/);
    const viaDep = koffi.load(viaDir.value.loadPath).func('int viaDep()') as () => number;
    expect(viaDep()).toBe(7);
  });

  it('the directory way refuses a FIFO at once too', () => {
    const r = openLibraryFile(fifo, 'directory');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error.why).toBe('is a FIFO, not a regular file');
  });
});
