// The DLL host: a child process that loads one MPI library's message-queue DLL and answers
// snapshot requests. It exists so that a DLL that segfaults, aborts or loops costs one
// snapshot, never the agent. It dies with its parent (PR_SET_PDEATHSIG), and because ranks
// are stopped with PTRACE_SEIZE, its death lets every rank run on.
import { type MqdError, mqdError } from '@mqd/model';
import { MqsSession } from '../mqs/session.js';
import { setParentDeathSignal } from '../native/libc.js';
import { DebugFileRegistry } from '../target/debug-file.js';
import type { HostMessage, HostRequest, SnapshotRequest } from './protocol.js';

const SIGKILL = 9;
setParentDeathSignal(SIGKILL);
if (process.ppid === 1) process.exit(1); // the parent died before we could ask

const registry = new DebugFileRegistry();
let session: MqsSession | null = null;
let sessionError: MqdError | null = null;
let dllOpenMicros = 0;

function send(m: HostMessage): void {
  process.send?.(m);
}

function openSession(req: SnapshotRequest): MqsSession | MqdError {
  if (session) return session.dllPath === req.dll ? session : mqdError('MQD_E_INTERNAL', 'one DLL per host');
  if (sessionError) return sessionError;
  const t0 = process.hrtime.bigint();
  const s = MqsSession.open(req.dll, {
    registry,
    readBudgetBytes: req.readBudgetBytes,
    stopTimeoutMs: req.stopTimeoutMs,
    whileStopped: (pid) => {
      if (currentHold > 0) {
        send({ type: 'stopped', id: currentId, pid });
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, currentHold);
      }
    },
  });
  dllOpenMicros = Number((process.hrtime.bigint() - t0) / 1000n);
  if (!s.ok) {
    sessionError = s.error;
    return s.error;
  }
  session = s.value;
  return session;
}

let currentId = 0;
let currentHold = 0;

function handle(req: HostRequest): void {
  if (req.type === 'ping') {
    send({ type: 'pong', id: req.id });
    return;
  }
  const s = openSession(req);
  if (!(s instanceof MqsSession)) {
    send({ type: 'failed', id: req.id, error: s });
    return;
  }
  currentId = req.id;
  currentHold = req.holdStoppedMs ?? 0;
  s.retain(new Set(req.keepPids));
  for (const t of req.targets) {
    send({ type: 'begin', id: req.id, pid: t.pid });
    send({ type: 'rank', id: req.id, rank: s.snapshotRank(t) });
  }
  // Counters are cumulative over the life of this host.
  send({
    type: 'done',
    id: req.id,
    library: s.library,
    version: s.version,
    stats: {
      dllOpenMicros,
      fetches: s.callbackCounts['fetch_data'] ?? 0,
      typeLookups: s.callbackCounts['find_type'] ?? 0,
      filesIndexed: registry.size,
    },
  });
}

process.on('message', (m: HostRequest) => {
  try {
    handle(m);
  } catch (e) {
    send({
      type: 'failed',
      id: m.id,
      error: mqdError('MQD_E_INTERNAL', `DLL host: ${(e as Error).stack ?? String(e)}`),
    });
  }
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready', pid: process.pid });
