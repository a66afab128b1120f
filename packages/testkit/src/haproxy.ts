// Debian's haproxy in front of several `mqd serve` instances, for the scale-out tests: one
// address on 127.0.0.1, round robin with a cookie that keeps a browser on the instance it
// started with (socket.io's polling transport needs that), a TCP health check every 300 ms so
// an instance that was killed is out of the rotation within a second, and `option redispatch`
// so a request whose instance went away is tried on another. The configuration written here is
// the one docs/deploy/haproxy.cfg describes for a site, with test ports and timeouts.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpawnedProcess, trySignal } from './spawned.js';
import { done, failed, pending, waitFor } from './wait.js';

export const HAPROXY = '/usr/sbin/haproxy';

export function haproxyAvailable(): boolean {
  return existsSync(HAPROXY);
}

export interface HaproxyBackend {
  /** The server's name in haproxy and its stickiness cookie value. */
  readonly name: string;
  readonly port: number;
}

export interface Haproxy {
  /** http://127.0.0.1:PORT */
  readonly url: string;
  readonly port: number;
  /** The configuration file as written. */
  readonly config: string;
  output(): string;
  /** Stops haproxy and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1 (asked of the kernel, then released). */
export function freeTcpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface HaproxyOptions {
  /**
   * haproxy's `timeout server`, s (default 60): longer than the instances' --snapshot-timeout, or
   * a long snapshot is cut off with a 504 while the instance is still reading it.
   */
  readonly serverTimeoutS?: number;
}

export function haproxyConfig(
  port: number,
  backends: readonly HaproxyBackend[],
  o: HaproxyOptions = {},
): string {
  return [
    'global',
    '  maxconn 4096',
    'defaults',
    '  mode http',
    '  timeout connect 2s',
    '  timeout client 60s',
    `  timeout server ${o.serverTimeoutS ?? 60}s`,
    // An upgraded socket.io connection lives as long as the page or the agent.
    '  timeout tunnel 1h',
    '  option redispatch',
    '  retries 2',
    'frontend mqd',
    `  bind 127.0.0.1:${port}`,
    '  default_backend aggregators',
    'backend aggregators',
    '  balance roundrobin',
    '  cookie MQDSRV insert indirect nocache httponly',
    ...backends.map(
      (b) => `  server ${b.name} 127.0.0.1:${b.port} cookie ${b.name} check inter 300 fall 2 rise 1`,
    ),
    '',
  ].join('\n');
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Starts haproxy on a free port in front of `backends`; resolves once it accepts connections. */
export async function startHaproxy(
  backends: readonly HaproxyBackend[],
  o: HaproxyOptions = {},
): Promise<Haproxy> {
  const dir = mkdtempSync(join(tmpdir(), 'mqd-haproxy-'));
  const port = await freeTcpPort();
  const config = haproxyConfig(port, backends, o);
  const file = join(dir, 'haproxy.cfg');
  writeFileSync(file, config);
  // -db: stay in the foreground, no daemon: the test holds the process and ends it by its pid.
  const child = spawn(HAPROXY, ['-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] });
  const proc = new SpawnedProcess(child);
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (child.pid !== undefined && proc.exitStatus() === undefined) trySignal(child.pid, 'SIGTERM');
    await waitFor(() => (proc.exitStatus() !== undefined ? done(true) : pending()), {
      timeoutMs: 10_000,
      what: 'haproxy to exit',
    }).catch(() => {
      if (child.pid !== undefined) trySignal(child.pid, 'SIGKILL');
    });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      async () => {
        const exit = proc.exitStatus();
        if (exit !== undefined)
          return failed(`haproxy exited (${exit.code ?? exit.signal}): ${proc.output()}`);
        return (await accepts(port)) ? done(true) : pending('not listening yet');
      },
      { timeoutMs: 15_000, what: `haproxy on 127.0.0.1:${port}` },
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return { url: `http://127.0.0.1:${port}`, port, config, output: () => proc.output(), stop };
}
