// Builds the conformance DLL, its MPI-like library and target (native/conformance), and runs
// targets that always get cleaned up.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach } from 'vitest';
import { Snapshotter } from '../src/index.js';

export const NATIVE = fileURLToPath(new URL('../native/conformance', import.meta.url));
export const BUILD = fileURLToPath(new URL('../native/build', import.meta.url));
export const SHIM = fileURLToPath(new URL('../native/shim', import.meta.url));

export interface Built {
  readonly dll: string;
  readonly lib: string;
  readonly target: string;
}

let built: Built | null = null;
export function buildConformance(): Built {
  if (!built) {
    execFileSync('make', ['-s', `OUT=${BUILD}`], { cwd: NATIVE, stdio: 'pipe' });
    // The native hot path the reader loads (npm run build makes it too; tests run from sources).
    execFileSync('make', ['-s'], { cwd: SHIM, stdio: 'pipe' });
    built = {
      dll: join(BUILD, 'libmqdtest_dll.so'),
      lib: join(BUILD, 'libmpi_mqdtest.so'),
      target: join(BUILD, 'mqdtest_target'),
    };
  }
  return built;
}

export interface Target {
  readonly pid: number;
  kill(): void;
}

const live = new Set<Target>();

/** Starts mqdtest_target and resolves once it printed its READY line (a condition, not a sleep). */
export function startTarget(
  exe: string,
  dll: string,
  mode: number,
  rank: number,
  env: NodeJS.ProcessEnv = {},
): Promise<Target> {
  return new Promise((resolve, reject) => {
    const child = spawn(exe, [dll, String(mode), String(rank)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    let out = '';
    const t: Target = {
      pid: child.pid ?? -1,
      kill() {
        live.delete(t);
        try {
          child.kill('SIGKILL');
        } catch {
          // already gone
        }
      },
    };
    live.add(t);
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('MQDTEST_READY')) resolve(t);
    });
    child.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('exit', (code) => {
      live.delete(t);
      reject(new Error(`mqdtest_target exited (${code}) before READY: ${out}`));
    });
  });
}

export function killAllTargets(): void {
  for (const t of [...live]) t.kill();
}
process.on('exit', killAllTargets);

/** A copy of the target and its library in `dir`, with the library's debug info moved out. */
export function strippedCopy(dir: string, b: Built): { target: string; lib: string; debug: string } {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const lib = join(dir, 'libmpi_mqdtest.so');
  const target = join(dir, 'mqdtest_target');
  const debug = join(dir, 'libmpi_mqdtest.so.debug');
  copyFileSync(b.lib, lib);
  copyFileSync(b.target, target);
  execFileSync('objcopy', ['--only-keep-debug', lib, debug]);
  execFileSync('strip', ['--strip-unneeded', lib]);
  return { target, lib, debug };
}

export function buildIdPath(root: string, buildId: string): string {
  return join(root, '.build-id', buildId.slice(0, 2), `${buildId.slice(2)}.debug`);
}

export function writeText(path: string, text: string): void {
  writeFileSync(path, text);
}

/** Polls `cond` until it holds or `timeoutMs` passes (a condition wait, not a sleep). */
export async function waitFor(cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let delay = 1;
  while (!cond()) {
    if (Date.now() > deadline)
      throw new Error(`condition not met within ${timeoutMs} ms: ${cond.toString()}`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 50);
  }
}

/**
 * Starts test/hold-snapshot.ts (a stand-in agent whose snapshot holds each rank stopped for a
 * minute) on `pid` and resolves once it says the rank is stopped, with its first line.
 */
export function holdStopped(dll: string, pid: number): Promise<{ child: ChildProcess; line: string }> {
  const script = fileURLToPath(new URL('./hold-snapshot.ts', import.meta.url));
  const child = spawn(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', script, dll, String(pid)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve({ child, line: out });
    });
    child.on('exit', (c) => reject(new Error(`hold-snapshot exited ${c}: ${out}`)));
  });
}

/**
 * A conformance target (`exe`, default the kit's) whose threads all sleep (in pause or the
 * barrier), past the READY line's printf: what a stop or a core should find.
 */
export async function startParked(
  built: { readonly target: string; readonly dll: string },
  env: Record<string, string>,
  exe: string = built.target,
): Promise<Target> {
  const t = await startTarget(exe, built.dll, 0, 0, env);
  const asleep = () => {
    try {
      return readdirSync(`/proc/${t.pid}/task`).every((tid) =>
        /^\d+ \(.*\) S /.test(readFileSync(`/proc/${t.pid}/task/${tid}/stat`, 'utf8')),
      );
    } catch {
      return false;
    }
  };
  await waitFor(asleep, 10_000);
  return t;
}

/**
 * For a test file that starts targets and Snapshotters: returns the file's Snapshotter maker.
 * After each test every target is killed and every Snapshotter it made disposed; after the file,
 * the targets again (a test that failed before its own cleanup leaves nothing behind).
 */
export function snapshottersPerTest(): (opts?: ConstructorParameters<typeof Snapshotter>[0]) => Snapshotter {
  const made: Snapshotter[] = [];
  afterEach(async () => {
    killAllTargets();
    await Promise.all(made.splice(0).map((s) => s.dispose()));
  });
  afterAll(() => killAllTargets());
  return (opts = {}) => {
    const s = new Snapshotter(opts);
    made.push(s);
    return s;
  };
}
