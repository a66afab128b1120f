// An independent oracle for queue contents: fixtures/mpi/tools/mqs-dump.c drives the MPI's own
// message-queue DLL against live ranks, with no MQD Dashboard code in between. Tests use it to
// check the fixtures (and can compare MQD's snapshots with it).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { assertUnreachable, err, type OpStatus, ok, type Pid, type Result } from '@mqd/model';
import { type AnyMpiName, FIXTURES_DIR, MPI_FAMILIES } from './config.js';
import { mpiPrefix, requireMpi } from './fixtures.js';

/** Path of the MPI's message-queue DLL (MPIR_dll_name of these builds; each family keeps it at the same place under its prefix). */
export function queueDll(mpi: AnyMpiName): string {
  const family = MPI_FAMILIES[mpi];
  switch (family) {
    case 'openmpi':
      return join(mpiPrefix(mpi), 'lib', 'openmpi', 'libompi_dbg_msgq.so');
    case 'mpich':
      return join(mpiPrefix(mpi), 'lib', 'libtvmpich.so');
    default:
      return assertUnreachable(family);
  }
}

/** The mqs-dump binary, compiled with the system cc on first use or when its source changed. */
export function mqsDumpBinary(): string {
  const source = join(FIXTURES_DIR, 'tools', 'mqs-dump.c');
  const outDir = join(FIXTURES_DIR, 'build', 'tools');
  const binary = join(outDir, 'mqs-dump');
  if (existsSync(binary) && statSync(binary).mtimeMs >= statSync(source).mtimeMs) return binary;
  mkdirSync(outDir, { recursive: true });
  const tmp = `${binary}.tmp-${process.pid}`;
  try {
    execFileSync('cc', ['-O1', '-g', '-Wall', '-o', tmp, source, '-ldw', '-ldl'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      encoding: 'utf8',
    });
  } catch (e) {
    rmSync(tmp, { force: true });
    const detail = e instanceof Error && 'stderr' in e && typeof e.stderr === 'string' ? e.stderr : String(e);
    throw new Error(
      `MQD_TESTKIT_E_COMPILE: cannot build ${source}: install a C compiler and libdw-dev (scripts/provision.sh does):\n${detail}`,
    );
  }
  renameSync(tmp, binary);
  return binary;
}

/** One queue entry exactly as the DLL filled mqs_pending_operation (ranks and tags as int32). */
export interface DumpedOp {
  readonly status: OpStatus;
  readonly desiredLocal: number;
  readonly desiredGlobal: number;
  readonly tagWild: boolean;
  readonly desiredTag: number;
  readonly desiredLength: number;
  readonly systemBuffer: boolean;
  readonly actualLocal: number;
  readonly actualGlobal: number;
  readonly actualTag: number;
  readonly actualLength: number;
  /** Target address of the buffer, 0x-prefixed hex ("0" when none). */
  readonly buffer: string;
  readonly extraText: readonly string[];
}

export interface DumpedComm {
  readonly id: string;
  readonly name: string;
  readonly localRank: number;
  readonly size: number;
  /** null: the DLL said it has no information for this queue. */
  readonly sends: DumpedOp[] | null;
  readonly receives: DumpedOp[] | null;
  readonly unexpected: DumpedOp[] | null;
}

export interface DumpedProcess {
  readonly pid: number;
  readonly comms: readonly DumpedComm[];
  /** Set when the DLL refused the process (e.g. no queues, missing symbols). */
  readonly error?: string;
}

const KIND = { send: 'sends', recv: 'receives', unexp: 'unexpected' } as const;
type KindKey = keyof typeof KIND;
const isKind = (k: string): k is KindKey => Object.hasOwn(KIND, k);
const STATUSES: readonly OpStatus[] = ['pending', 'matched', 'complete'];

/** key=value and key="quoted value" fields of one output line. */
function fields(line: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of line.matchAll(/(\w+)=(?:"([^"]*)"|(\S+))/g)) {
    if (m[1] !== undefined) out.set(m[1], m[2] ?? m[3] ?? '');
  }
  return out;
}

/** Parses mqs-dump's output (format documented in mqs-dump.c). */
export function parseMqsDump(text: string): DumpedProcess[] {
  type Building<T> = { -readonly [K in keyof T]: T[K] };
  const procs: { pid: number; comms: DumpedComm[]; error?: string }[] = [];
  let comm: Building<DumpedComm> | undefined;
  for (const line of text.split('\n')) {
    const [word, second] = line.split(' ');
    const f = fields(line);
    const num = (k: string): number => {
      const v = f.get(k);
      if (v === undefined || !/^-?\d+$/.test(v)) throw new Error(`mqs-dump: no number ${k} in: ${line}`);
      return Number(v);
    };
    const proc = procs.at(-1);
    switch (word) {
      case 'pid':
        procs.push({ pid: Number(second), comms: [] });
        comm = undefined;
        break;
      case 'error':
        if (proc) proc.error = line.slice('error '.length);
        break;
      case 'comm':
        comm = {
          id: f.get('id') ?? '',
          name: f.get('name') ?? '',
          localRank: num('rank'),
          size: num('size'),
          sends: [],
          receives: [],
          unexpected: [],
        };
        proc?.comms.push(comm);
        break;
      case 'noinfo':
        if (comm && second !== undefined && isKind(second)) comm[KIND[second]] = null;
        break;
      case 'op': {
        if (!comm || second === undefined || !isKind(second))
          throw new Error(`mqs-dump: stray line: ${line}`);
        const status = STATUSES.find((s) => s === f.get('status'));
        if (status === undefined) throw new Error(`mqs-dump: bad status in: ${line}`);
        const queue = comm[KIND[second]];
        queue?.push({
          status,
          desiredLocal: num('local'),
          desiredGlobal: num('global'),
          tagWild: num('tag_wild') !== 0,
          desiredTag: num('tag'),
          desiredLength: num('len'),
          systemBuffer: num('sysbuf') !== 0,
          actualLocal: num('actual_local'),
          actualGlobal: num('actual_global'),
          actualTag: num('actual_tag'),
          actualLength: num('actual_len'),
          buffer: f.get('buffer') ?? '0',
          extraText: [0, 1, 2, 3, 4].flatMap((k) => f.get(`extra${k}`) ?? []),
        });
        break;
      }
      default:
        break; // the 'dll' banner and blank lines
    }
  }
  return procs;
}

/**
 * Fields a DLL asks for under names its library no longer has, and their new places, as
 * mqs-dump's MQS_DUMP_RENAME reads them: MPICH 4.0.x ch4's dll_mpich.c looks up MPIDI_Devreq_t's
 * am (4.0.2: inside its ch4 union) and MPIDIG_req_t's rank, tag and context_id (4.0.2: in the
 * u.recv union member; mpidpre.h). Written
 * here from the library's headers, independently of MQD's own table (packages/mqd-core
 * src/mqs/dll-fields.ts), which the tests compare against this oracle.
 */
export const DLL_FIELD_RENAMES =
  'MPIDI_Devreq_t.am=ch4.am;' +
  'MPIDIG_req_t.rank=u.recv.source;MPIDIG_req_t.tag=u.recv.tag;MPIDIG_req_t.context_id=u.recv.context_id';

/**
 * Reads the queues of live MPI processes through the MPI's own DLL (with DLL_FIELD_RENAMES
 * answered unless `renames: false`: then the DLL gets -1 for them, as from a debugger that does
 * not know them). Failing to run the tool is
 * an error value; a process the DLL refused has `error` set.
 */
export function mqsDump(
  mpi: AnyMpiName,
  pids: readonly Pid[],
  opts: { readonly renames?: boolean } = {},
): Promise<Result<DumpedProcess[], string>> {
  requireMpi(mpi);
  const binary = mqsDumpBinary();
  const env = { ...process.env, MQS_DUMP_RENAME: opts.renames === false ? '' : DLL_FIELD_RENAMES };
  return new Promise((resolve) => {
    execFile(
      binary,
      [queueDll(mpi), ...pids.map(String)],
      { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 << 20, env },
      (e, stdout, stderr) => {
        // Exit 1 still prints every process; only a run with nothing parsed is a failure.
        const procs = parseMqsDump(stdout);
        if (procs.length !== pids.length) {
          resolve(
            err(`mqs-dump ${pids.join(' ')} failed (${e?.message ?? 'short output'}): ${stderr}${stdout}`),
          );
        } else {
          resolve(ok(procs));
        }
      },
    );
  });
}
