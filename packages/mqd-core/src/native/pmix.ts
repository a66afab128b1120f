// A PMIx tool connection to a launcher: Open MPI 5's `mpirun` (prterun) has no MPIR
// process table; it is a PMIx server, and a tool asks it for the job's processes. This loads the
// launcher's own libpmix (the one it maps: same version on both ends), connects to the server
// of that pid (PMIX_SERVER_PIDINFO), asks for its namespaces and the job's process table
// (PMIX_QUERY_PROC_TABLE: pmix_proc_info_t per rank) and disconnects.
// Runs as the launcher's owner (the locator child, apps/cli/src/locate-as-owner.ts): PMIx's
// rendezvous files are private to the owner, and the library is the user's code.
// Layouts (LP64, OpenPMIx 4/5, checked against pmix_common.h with offsetof): pmix_value_t 32
// bytes (type uint16 at 0, union at 8), pmix_info_t 552 (key char[512], flags uint32 at 512,
// value at 520), pmix_proc_t 260 (nspace char[256], rank uint32), pmix_proc_info_t 296
// (hostname char* at 264, executable_name at 272, pid int at 280, exit_code at 284, state
// uint8 at 288), pmix_data_array_t 24 (type uint16, size at 8, array at 16), pmix_query_t 24
// (keys char** , qualifiers pmix_info_t*, nqual size_t).
// The launch half (packages/mpir/src/pmix-launch.ts) keeps one connection open while the job's
// ranks wait in PMIx_Init (PMIX_DEBUG_STOP_IN_INIT) and releases them with PMIx_Notify_event
// (PMIX_DEBUGGER_RELEASE): `PmixTool`. Constants from this build's pmix_common.h.
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import koffi from 'koffi';
import { nativeFree, ownedAlloc, withScratch } from './alloc.js';
import { _memcpy, _strlen } from './libc.js';

const VALUE_UNION = 8;
const INFO_SIZE = 552;
const INFO_VALUE = 520;
const PROC_SIZE = 260;
const PINFO_SIZE = 296;
const QUERY_SIZE = 24;
const PMIX_STRING = 3;
const PMIX_PID = 5;
const PMIX_DATA_ARRAY = 39;
const PMIX_PROC_INFO = 38;
const PMIX_SUCCESS = 0;
const PMIX_PROC = 22;
const PMIX_BOOL = 1;
const PMIX_RANGE_CUSTOM = 6;
const PMIX_DEBUGGER_RELEASE = -3;
/** PMIX_RANK_WILDCARD: every rank of a namespace. */
const RANK_WILDCARD = 0xfffffffe;
/** pmix_proc_state_t of a process that has connected to its server (PMIx_Init). */
export const PMIX_PROC_STATE_CONNECTED = 6;

export interface PmixProc {
  readonly rank: number;
  readonly pid: number;
  readonly host: string;
  readonly executable: string;
  /** pmix_proc_state_t (PMIX_PROC_STATE_RUNNING = 4, ...). */
  readonly state: number;
}

export interface PmixJob {
  /** The application's namespace (e.g. prterun-node-1234@1). */
  readonly nspace: string;
  readonly procs: readonly PmixProc[];
  /** Every namespace the server reported (the launcher's own and the applications'). */
  readonly namespaces: readonly string[];
}

type Fn = (...args: unknown[]) => unknown;
const libs = new Map<string, Record<string, Fn>>();

function bind(path: string): Record<string, Fn> {
  let f = libs.get(path);
  if (f) return f;
  const lib = koffi.load(path);
  f = {
    init: lib.func('int PMIx_tool_init(void *proc, void *info, size_t ninfo)') as Fn,
    fini: lib.func('int PMIx_tool_finalize()') as Fn,
    query: lib.func(
      'int PMIx_Query_info(void *queries, size_t nqueries, _Out_ uintptr_t *results, _Out_ size_t *nresults)',
    ) as Fn,
    free: lib.func('void PMIx_Info_free(uintptr_t info, size_t n)') as Fn,
    error: lib.func('const char *PMIx_Error_string(int status)') as Fn,
    notify: lib.func(
      'int PMIx_Notify_event(int status, void *source, uint8_t range, void *info, size_t ninfo, void *cbfunc, void *cbdata)',
    ) as Fn,
  };
  libs.set(path, f);
  return f;
}

/** `len` bytes of this process's memory at `addr`. */
function peek(addr: bigint, len: number): Buffer {
  return withScratch((alloc) => {
    const block = alloc('uint8_t', Math.max(1, len));
    _memcpy(BigInt(koffi.address(block)), addr, len);
    // A copy: the view is of the scratch block, freed when this returns.
    return Buffer.from(new Uint8Array(koffi.view(block, len) as ArrayBuffer));
  });
}

function peekString(addr: bigint): string {
  if (addr === 0n) return '';
  const n = Number(_strlen(addr) as number | bigint);
  return peek(addr, Math.min(n, 1 << 20)).toString('utf8');
}

const cstr = (b: Buffer, at: number, max: number): string => {
  const s = b.subarray(at, at + max);
  const z = s.indexOf(0);
  return s.subarray(0, z < 0 ? s.length : z).toString('utf8');
};

/**
 * Writes a pmix_info_t at `at` of `buf`: a pid (int), a bool (one byte) or a pointer (a native
 * string or pmix_proc_t the caller keeps alive for the call).
 */
function putInfo(buf: Buffer, at: number, key: string, type: number, value: number | bigint): void {
  buf.fill(0, at, at + INFO_SIZE);
  buf.write(key, at, 511, 'utf8');
  buf.writeUInt16LE(type, at + INFO_VALUE);
  if (type === PMIX_PID) buf.writeInt32LE(Number(value), at + INFO_VALUE + VALUE_UNION);
  else if (type === PMIX_BOOL) buf.writeUInt8(Number(value) ? 1 : 0, at + INFO_VALUE + VALUE_UNION);
  else buf.writeBigUInt64LE(BigInt(value), at + INFO_VALUE + VALUE_UNION);
}

/**
 * One query (keys, optional nspace qualifier) as PMIx wants it: the pmix_query_t, its NULL-ended
 * key array and strings in native memory (scratch of the caller).
 */
function runQuery(
  f: Record<string, Fn>,
  alloc: (type: 'uint8_t', n: number) => unknown,
  key: string,
  nspace: string | null,
): Result<{ infos: bigint; n: number }, string> {
  const native = (s: string): bigint => {
    const b = alloc('uint8_t', Buffer.byteLength(s) + 1);
    koffi.encode(b, 'char', s, Buffer.byteLength(s) + 1);
    return BigInt(koffi.address(b));
  };
  const keys = alloc('uint8_t', 16);
  const keyView = new BigUint64Array(koffi.view(keys, 16) as ArrayBuffer);
  keyView[0] = native(key);
  keyView[1] = 0n;
  let qualAddr = 0n;
  if (nspace !== null) {
    const qual = alloc('uint8_t', INFO_SIZE);
    const qb = Buffer.alloc(INFO_SIZE);
    putInfo(qb, 0, 'pmix.nspace', PMIX_STRING, native(nspace));
    koffi.encode(qual, koffi.array('uint8_t', INFO_SIZE), [...qb]);
    qualAddr = BigInt(koffi.address(qual));
  }
  const q = Buffer.alloc(QUERY_SIZE);
  q.writeBigUInt64LE(BigInt(koffi.address(keys)), 0);
  q.writeBigUInt64LE(qualAddr, 8);
  q.writeBigUInt64LE(nspace !== null ? 1n : 0n, 16);
  const results: bigint[] = [0n];
  const count: number[] = [0];
  const rc = f['query']?.(q, 1, results, count) as number;
  if (rc !== PMIX_SUCCESS) return err(`PMIx_Query_info(${key}): ${String(f['error']?.(rc) ?? rc)}`);
  return ok({ infos: BigInt(results[0] ?? 0n), n: Number(count[0] ?? 0) });
}

/** The value of each info in a result array: key → {type, union bytes}. */
function readInfos(infos: bigint, n: number): Map<string, { type: number; word: bigint }> {
  const out = new Map<string, { type: number; word: bigint }>();
  if (infos === 0n || n === 0) return out;
  const b = peek(infos, n * INFO_SIZE);
  for (let i = 0; i < n; i++) {
    const at = i * INFO_SIZE;
    out.set(cstr(b, at, 512), {
      type: b.readUInt16LE(at + INFO_VALUE),
      word: b.readBigUInt64LE(at + INFO_VALUE + VALUE_UNION),
    });
  }
  return out;
}

/** The one open tool connection: PMIx keeps a tool's state in process globals. */
let open: PmixTool | null = null;

/**
 * A PMIx tool connection to the server of one pid (a launcher such as prterun), for several
 * queries and a debugger release; `close()` finalizes it. One at a time per process: PMIx keeps
 * its tool state in globals. Coded errors: MQD_E_PMIX.
 */
export class PmixTool {
  private closed = false;

  private constructor(
    private readonly f: Record<string, Fn>,
    /** Our pmix_proc_t, filled by PMIx_tool_init; freed by close(). */
    private readonly me: unknown,
    readonly serverPid: number,
  ) {}

  /** PMIx_tool_init to the server of `serverPid` (PMIX_SERVER_PIDINFO) through `library`. */
  static connect(library: string, serverPid: number): Result<PmixTool, MqdError> {
    if (open !== null) {
      return err(
        mqdError(
          'MQD_E_PMIX',
          `a PMIx tool connection to pid ${open.serverPid} is already open in this process (one at a time)`,
        ),
      );
    }
    let f: Record<string, Fn>;
    try {
      f = bind(library);
    } catch (e) {
      return err(mqdError('MQD_E_PMIX', `cannot load ${library}: ${(e as Error).message}`));
    }
    const me = ownedAlloc('uint8_t', PROC_SIZE);
    const info = Buffer.alloc(INFO_SIZE);
    putInfo(info, 0, 'pmix.srvr.pidinfo', PMIX_PID, serverPid);
    const rc = f['init']?.(me, info, 1) as number;
    if (rc !== PMIX_SUCCESS) {
      nativeFree(me);
      return err(
        mqdError(
          'MQD_E_PMIX',
          `PMIx_tool_init to the server of pid ${serverPid}: ${String(f['error']?.(rc) ?? rc)}`,
        ),
      );
    }
    open = new PmixTool(f, me, serverPid);
    return ok(open);
  }

  private alive(): Result<void, MqdError> {
    return this.closed
      ? err(mqdError('MQD_E_INTERNAL', `the PMIx tool connection to pid ${this.serverPid} is closed`))
      : ok(undefined);
  }

  /** Every namespace the server knows (its own ends in @0, its jobs' in @1, @2, ...). */
  namespaces(): Result<string[], MqdError> {
    const a = this.alive();
    if (!a.ok) return a;
    return withScratch((alloc) => {
      const ns = runQuery(this.f, alloc, 'pmix.qry.ns', null);
      if (!ns.ok) return err(mqdError('MQD_E_PMIX', ns.error));
      try {
        const v = readInfos(ns.value.infos, ns.value.n).get('pmix.qry.ns');
        return ok(v && v.type === PMIX_STRING ? peekString(v.word).split(',').filter(Boolean) : []);
      } finally {
        this.f['free']?.(ns.value.infos, ns.value.n);
      }
    });
  }

  /** The first application namespace (not the server's own @0), or null when none runs yet. */
  jobNamespace(): Result<{ nspace: string | null; namespaces: string[] }, MqdError> {
    const all = this.namespaces();
    if (!all.ok) return all;
    return ok({ nspace: all.value.find((s) => !s.endsWith('@0')) ?? null, namespaces: all.value });
  }

  /** PMIX_QUERY_PROC_TABLE of `nspace`: every process, sorted by rank. */
  procTable(nspace: string): Result<PmixProc[], MqdError> {
    const a = this.alive();
    if (!a.ok) return a;
    return withScratch((alloc) => {
      const pt = runQuery(this.f, alloc, 'pmix.qry.ptable', nspace);
      if (!pt.ok) return err(mqdError('MQD_E_PMIX', pt.error));
      try {
        const v = readInfos(pt.value.infos, pt.value.n).get('pmix.qry.ptable');
        if (!v || v.type !== PMIX_DATA_ARRAY || v.word === 0n)
          return err(mqdError('MQD_E_PMIX', `no process table for ${nspace}`));
        const darray = peek(v.word, 24);
        const type = darray.readUInt16LE(0);
        const size = Number(darray.readBigUInt64LE(8));
        const array = darray.readBigUInt64LE(16);
        if (type !== PMIX_PROC_INFO || size > 1 << 22)
          return err(mqdError('MQD_E_PMIX', `unexpected process table (type ${type}, ${size} entries)`));
        const rows = size === 0 ? Buffer.alloc(0) : peek(array, size * PINFO_SIZE);
        const procs: PmixProc[] = [];
        for (let i = 0; i < size; i++) {
          const at = i * PINFO_SIZE;
          procs.push({
            rank: rows.readUInt32LE(at + 256),
            host: peekString(rows.readBigUInt64LE(at + 264)),
            executable: peekString(rows.readBigUInt64LE(at + 272)),
            pid: rows.readInt32LE(at + 280),
            state: rows.readUInt8(at + 288),
          });
        }
        procs.sort((x, y) => x.rank - y.rank);
        return ok(procs);
      } finally {
        this.f['free']?.(pt.value.infos, pt.value.n);
      }
    });
  }

  /**
   * Releases every process of `nspace` held for a debugger (PMIX_DEBUG_STOP_IN_INIT: each waits
   * in PMIx_Init for this event): PMIx_Notify_event(PMIX_DEBUGGER_RELEASE) with a custom range of
   * {nspace, PMIX_RANK_WILDCARD}, not for default handlers. PMIx copies the infos before it
   * returns (the scratch is freed then); the server acknowledges asynchronously, so a query
   * afterwards on the same connection is answered only once it has the release.
   */
  releaseDebugger(nspace: string): Result<void, MqdError> {
    const a = this.alive();
    if (!a.ok) return a;
    return withScratch((alloc) => {
      const target = alloc('uint8_t', PROC_SIZE);
      const tb = Buffer.alloc(PROC_SIZE);
      tb.write(nspace, 0, 255, 'utf8');
      tb.writeUInt32LE(RANK_WILDCARD, 256);
      koffi.encode(target, koffi.array('uint8_t', PROC_SIZE), [...tb]);
      const infos = Buffer.alloc(2 * INFO_SIZE);
      putInfo(infos, 0, 'pmix.evrange', PMIX_PROC, BigInt(koffi.address(target)));
      putInfo(infos, INFO_SIZE, 'pmix.evnondef', PMIX_BOOL, 1);
      const rc = this.f['notify']?.(PMIX_DEBUGGER_RELEASE, null, PMIX_RANGE_CUSTOM, infos, 2, null, null);
      if (rc !== PMIX_SUCCESS)
        return err(
          mqdError(
            'MQD_E_PMIX',
            `PMIx_Notify_event(PMIX_DEBUGGER_RELEASE) to ${nspace}: ${String(this.f['error']?.(rc as number) ?? rc)}`,
          ),
        );
      return ok(undefined);
    });
  }

  /** PMIx_tool_finalize; frees our native proc. Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.f['fini']?.();
    } finally {
      nativeFree(this.me);
      if (open === this) open = null;
    }
  }
}

/**
 * The process table of the job launched by the PMIx server `serverPid`, through `library` (a
 * libpmix.so the server maps). Coded errors: MQD_E_PMIX when the connection or a query fails.
 */
export function pmixProcTable(library: string, serverPid: number): Result<PmixJob, MqdError> {
  const tool = PmixTool.connect(library, serverPid);
  if (!tool.ok) return tool;
  try {
    const job = tool.value.jobNamespace();
    if (!job.ok) return job;
    const { nspace, namespaces } = job.value;
    if (nspace === null) {
      return err(
        mqdError(
          'MQD_E_PMIX',
          `the PMIx server of pid ${serverPid} runs no job (namespaces: ${namespaces.join(', ') || 'none'})`,
        ),
      );
    }
    const procs = tool.value.procTable(nspace);
    if (!procs.ok) return procs;
    return ok({ nspace, procs: procs.value, namespaces });
  } finally {
    tool.value.close();
  }
}
