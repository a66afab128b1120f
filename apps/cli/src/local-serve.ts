// The aggregator with (or without) an in-process agent for this node that uses the real seams:
// what `mqd serve` runs, and what the end-to-end tests start.
import { hostname } from 'node:os';
import type { DllPolicy } from '@mqd/core';
import { normaliseHost } from '@mqd/mpir';
import { type Served, type ServeOptions, type ServerConfig, serve } from '@mqd/server';
import type { LocalSeams } from './demo-seams.js';
import { ProcJobDiscovery } from './real-discovery.js';
import { MpirJobLocator } from './real-locator.js';
import { CoreRankReader } from './real-reader.js';

export interface LocalServe {
  readonly served: Served;
  /** Stops the aggregator, the agent and the DLL hosts. */
  close(): Promise<void>;
}

export async function serveWithLocalAgent(
  config: ServerConfig,
  opts: {
    localAgent?: boolean;
    dllPolicy?: DllPolicy;
    print?: (line: string) => void;
    /** Wraps the agent's seams (the demo adds its stand-in job: demo-seams.ts). */
    seams?: (real: LocalSeams) => LocalSeams;
  } = {},
): Promise<LocalServe> {
  const reader = opts.localAgent === false ? null : new CoreRankReader(undefined, opts.dllPolicy ?? 'any');
  const here = normaliseHost(hostname());
  // The in-process agent's job discovery and counters (the hang watch).
  const real: LocalSeams | null = reader
    ? { reader, locator: new MpirJobLocator(here), discovery: new ProcJobDiscovery(here) }
    : null;
  const seams = real && opts.seams ? opts.seams(real) : real;
  const options: ServeOptions = {
    config,
    reader: seams?.reader ?? null,
    locator: seams?.locator ?? null,
    discovery: seams?.discovery ?? null,
    localHost: here,
    print: opts.print ?? (() => {}),
    // The server log goes to stderr at config.logLevel (--log-level, MQD_LOG_LEVEL).
  };
  const served = await serve(options);
  await served.agent?.whenConnected();
  return {
    served,
    async close() {
      // The readers go at once, beside the server: a read in flight (the watch's, a user's) then
      // ends with a coded error instead of starting new hosts while the requests drain.
      await Promise.all([served.close(), reader?.dispose()]);
    },
  };
}
