// An attacker's toolbox for the privilege-separation tests: builds native/security (a fake
// libmpi.so.40, a rank-looking process, a DLL whose constructor records its euid, a fake
// starter), starts processes as a real unprivileged user (setpriv to 65534), and watches a pid
// from another process in a tight loop to prove it was never stopped or traced.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const NOBODY = 65534;
const SRC = fileURLToPath(new URL('../native/security', import.meta.url));

export interface Attacker {
  readonly dir: string;
  readonly rank: string;
  readonly starter: string;
  readonly evil: string;
  /** Where the evil DLL's constructor appends `euid=N uid=N`. */
  readonly out: string;
  /** The same DLL built to also write the environment it was given to `envOut`. */
  readonly evilEnv: string;
  readonly envOut: string;
  dispose(): void;
}

/** Builds the attacker's files in a fresh directory owned by 65534 (as the attacker would). */
export function buildAttacker(): Attacker {
  const dir = mkdtempSync('/tmp/mqd-attacker-');
  const out = join(dir, 'evil.out');
  const cc = (args: string[]) => execFileSync('cc', ['-g', '-O0', ...args], { stdio: 'pipe' });
  cc([
    '-shared',
    '-fPIC',
    '-Wl,-soname,libmpi.so.40',
    '-o',
    join(dir, 'libmpi.so.40'),
    join(SRC, 'fake_mpi.c'),
  ]);
  cc([
    '-o',
    join(dir, 'fake_rank'),
    join(SRC, 'fake_rank.c'),
    join(dir, 'libmpi.so.40'),
    '-Wl,-rpath,$ORIGIN',
  ]);
  cc(['-shared', '-fPIC', `-DEVIL_OUT="${out}"`, '-o', join(dir, 'libevil.so'), join(SRC, 'evil_dll.c')]);
  const envOut = join(dir, 'environ.out');
  cc([
    '-shared',
    '-fPIC',
    `-DEVIL_OUT="${out}"`,
    `-DEVIL_ENV_OUT="${envOut}"`,
    '-o',
    join(dir, 'libevilenv.so'),
    join(SRC, 'evil_dll.c'),
  ]);
  cc(['-o', join(dir, 'fake_starter'), join(SRC, 'fake_starter.c')]);
  chmodSync(dir, 0o755);
  chownSync(dir, NOBODY, NOBODY);
  for (const f of readdirSync(dir)) chownSync(join(dir, f), NOBODY, NOBODY);
  return {
    dir,
    rank: join(dir, 'fake_rank'),
    starter: join(dir, 'fake_starter'),
    evil: join(dir, 'libevil.so'),
    out,
    evilEnv: join(dir, 'libevilenv.so'),
    envOut,
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface Started {
  readonly pid: number;
  kill(): void;
}

/** Starts argv (as uid 65534 unless `asRoot`) and resolves once it printed FAKE_READY. */
export function startProcess(
  argv: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; asRoot?: boolean } = {},
): Promise<Started> {
  const [cmd, ...args] = opts.asRoot
    ? argv
    : ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', ...argv];
  const child: ChildProcess = spawn(cmd ?? 'false', args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: '/tmp', ...opts.env },
  });
  const s: Started = {
    pid: child.pid ?? -1,
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('FAKE_READY')) resolve(s);
    });
    child.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('exit', (code) => reject(new Error(`${argv.join(' ')} exited (${code}) before READY: ${out}`)));
  });
}

export interface WatchResult {
  readonly samples: number;
  /** States seen (letters from /proc/PID/status State:). */
  readonly states: string[];
  /** Every non-zero TracerPid seen. */
  readonly tracers: number[];
}

/**
 * Watches `pid` from a separate process in a tight synchronous loop (the test's own event loop
 * would miss a stop of a few milliseconds) until `stop()`.
 */
export async function watchPid(pid: number): Promise<{ stop(): Promise<WatchResult> }> {
  const flag = join(mkdtempSync('/tmp/mqd-watch-'), 'stop');
  const script = `
    const fs = require('node:fs');
    const states = new Set(), tracers = new Set(); let samples = 0;
    const sample = () => {
      let st;
      try { st = fs.readFileSync('/proc/${pid}/status', 'utf8'); } catch { return; }
      samples++;
      const s = /^State:\\s+(\\S)/m.exec(st); if (s) states.add(s[1]);
      const t = /^TracerPid:\\s+(\\d+)/m.exec(st); if (t && t[1] !== '0') tracers.add(Number(t[1]));
    };
    sample(); // at least one sample before the caller goes on
    process.stdout.write('WATCHING\\n');
    do { for (let i = 0; i < 50; i++) sample(); } while (!fs.existsSync(${JSON.stringify(flag)}));
    process.stdout.write(JSON.stringify({ samples, states: [...states], tracers: [...tracers] }) + '\\n');
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<string>((resolve, reject) =>
    child.on('exit', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`watcher exited ${code}: ${out}`)),
    ),
  );
  await new Promise<void>((resolve) => {
    const check = (): void => {
      if (out.includes('WATCHING')) resolve();
      else child.stdout?.once('data', check);
    };
    check();
  });
  return {
    async stop() {
      writeFileSync(flag, '');
      try {
        const line = (await exited).split('\n').find((l) => l.startsWith('{'));
        return JSON.parse(line ?? '{}') as WatchResult;
      } finally {
        child.kill('SIGKILL');
        rmSync(join(flag, '..'), { recursive: true, force: true });
      }
    },
  };
}
