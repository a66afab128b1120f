// The built `mqd` as a user runs it, for the CLI tests: exit code, stdout and stderr, never a
// rejection (a failing command is what several tests check).
import { type ChildProcess, execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const MQD = fileURLToPath(new URL('../bin/mqd.js', import.meta.url));
const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const run = promisify(execFile);

export interface MqdRun {
  readonly code: number;
  readonly out: string;
  readonly err: string;
}

/** A node command's exit code and output, never a rejection. */
async function outcome(
  argv: readonly string[],
  opts: { maxBuffer: number; env?: NodeJS.ProcessEnv },
): Promise<MqdRun> {
  try {
    const r = await run(process.execPath, argv, opts);
    return { code: 0, out: r.stdout, err: r.stderr };
  } catch (e) {
    const x = e as { code?: number; stdout?: string; stderr?: string };
    return { code: x.code ?? -1, out: x.stdout ?? '', err: x.stderr ?? '' };
  }
}

export async function mqd(args: readonly string[], env?: NodeJS.ProcessEnv): Promise<MqdRun> {
  return outcome([MQD, ...args], { maxBuffer: 256 << 20, ...(env ? { env } : {}) });
}

/** `mqd ARGS` from the sources (no build needed): its exit code and output. */
export async function mqdSource(args: readonly string[]): Promise<MqdRun> {
  const script = `const { main } = await import(${JSON.stringify(MAIN)}); process.exitCode = await main(process.argv.slice(1));`;
  return outcome(['--conditions=source', '--import', 'tsx', '--input-type=module', '-e', script, ...args], {
    maxBuffer: 64 << 20,
  });
}

/** The URL a started `mqd serve` child prints once it listens; rejects if it exits first. */
export function servedUrl(child: ChildProcess): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /aggregator at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.on('exit', (code) => reject(new Error(`mqd serve exited (${code}) before listening: ${out}`)));
  });
}
