// Launch a job under the tool (the MPIR "launch" half): the starter is traced from its first
// instruction, told it is being debugged before it spawns anything, and held at
// MPIR_Breakpoint, where its process table is complete. Open MPI's ranks then wait at the end
// of MPI_Init until mpirun is let go, so a first snapshot there sees them with their
// communicators built; hydra's ranks are not held (unless MPIEXEC_DEBUG is set, in which case
// they spin on MPIR_debug_gate, which we set once they reach it).
//
// Process layout: Node -> timeout (coreutils, no time limit: it forwards signals and passes on
// the exit status) -> sh -> exec starter. The tracee must not be a child libuv spawned: libuv
// waitpids its children on SIGCHLD and would take the starter's ptrace-stops for its exit.
// sh writes its pid on fd 3 and waits for a line there; we seize it while it waits, answer, and
// it execs the starter under our eyes (PTRACE_EVENT_EXEC).
//
// Steps: exec stop -> int3 at the program's entry point (AT_ENTRY: every DT_NEEDED library,
// e.g. Open MPI's libopen-rte, is mapped by then) -> MPIR_being_debugged=1 and int3 on
// MPIR_Breakpoint -> hit: table read, ip rewound, original byte back -> optional callback ->
// release (every thread detached). On every failure the job is killed: it was started to be
// debugged and half of that is not what the user asked for.
//
// A starter without MPIR symbols that maps libprrte and libpmix at its entry point is PRRTE's
// prterun (Open MPI 5's mpirun execs it; mpirun itself maps libpmix only and is followed like
// the wrappers): it has not run yet, so it is killed there and started again by
// pmix-launch.ts with its ranks held in PMIx_Init for a PMIx tool. Same contract, method 'pmix'.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { DebugFileRegistry, ProcessImage, ptraceExt as pt, readEnviron } from '@mqd/core';
import { err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { mpirSymbols, readMpirTable } from './attach.js';
import { type LocalHost, localHost } from './host.js';
import type { JobRanks } from './job.js';
import { capturePmixStarter, launchUnderPmix, type PmixStarter, pmixStarterKind } from './pmix-launch.js';
import { isAlive, starterInfo } from './procfs.js';
import {
  findExecutable,
  kill,
  killTree,
  type LaunchedJob,
  type LaunchOptions,
  launchedJob,
  Wrapper,
} from './supervise.js';
import { Tracer, type TraceStop } from './tracer.js';

export type { JobExit, LaunchedJob, LaunchOptions } from './supervise.js';

const WRAPPER_SCRIPT = 'echo $$ >&3; read go <&3; exec 3<&-; exec "$@"';
const DEFAULT_TIMEOUT_MS = 60_000;
const PID_LINE_TIMEOUT_MS = 10_000;
/** Programs that commonly exec the real starter (wrapper scripts): we follow their next exec. */
const EXECERS =
  /^(?:sh|bash|dash|zsh|ksh|env|nice|nohup|stdbuf|setsid|chrt|taskset|numactl|python[\d.]*|perl[\d.]*|ruby[\d.]*)$/;
const AT_ENTRY = 9n;

function entryPoint(pid: number): bigint | null {
  try {
    const auxv = readFileSync(`/proc/${pid}/auxv`);
    for (let off = 0; off + 16 <= auxv.length; off += 16) {
      if (auxv.readBigUInt64LE(off) === AT_ENTRY) return auxv.readBigUInt64LE(off + 8);
    }
  } catch {
    // Gone or not ours: the caller reports it.
  }
  return null;
}

async function releaseGates(
  job: JobRanks,
  here: LocalHost,
  registry: DebugFileRegistry,
  timeoutMs: number,
): Promise<string[]> {
  // Hydra holds each rank in MPI_Init on MPIR_debug_gate when MPIEXEC_DEBUG is set. A rank in
  // the table may not have exec'd its program yet: wait until its MPI library is mapped.
  const warnings: string[] = [];
  const pending = new Map((job.byHost[here.short] ?? []).map((r) => [r.pid as number, r]));
  const deadline = Date.now() + timeoutMs;
  while (pending.size > 0) {
    for (const [pid, r] of pending) {
      if (!isAlive(pid)) {
        pending.delete(pid);
        continue;
      }
      const img = ProcessImage.load(pid, registry);
      const gate = img.ok && img.value.mpiLibrary() ? img.value.findSymbol('MPIR_debug_gate') : null;
      if (!gate) continue;
      if (pt.vmWrite(pid, gate.address, Uint8Array.of(1, 0, 0, 0)) !== 4)
        warnings.push(`could not set MPIR_debug_gate in rank ${r.rank} (pid ${pid}): it stays held`);
      pending.delete(pid);
    }
    if (pending.size === 0) break;
    if (Date.now() >= deadline) {
      for (const r of pending.values())
        warnings.push(
          `rank ${r.rank} (pid ${r.pid}) did not load its MPI library in time: MPIR_debug_gate not set`,
        );
      break;
    }
    await new Promise((res) => setTimeout(res, 20));
  }
  return warnings;
}

/** Where the traced launch ended: at MPIR_Breakpoint, or at the entry point of PRRTE's prterun. */
type Drove<T> =
  | { readonly kind: 'mpir'; readonly job: JobRanks; readonly value: T | undefined }
  | { readonly kind: 'pmix'; readonly starter: PmixStarter };

async function drive<T>(
  tracer: Tracer,
  argv: readonly string[],
  opts: LaunchOptions<T>,
  registry: DebugFileRegistry,
  here: LocalHost,
  found: { job: JobRanks | null },
): Promise<Result<Drove<T>, MqdError>> {
  const pid = tracer.pid;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  let phase: 'exec' | 'entry' | 'mpir' = 'exec';
  let execs = 0;
  let entry: bigint | null = null;
  let image: ProcessImage | null = null;
  let mpirBreakpoint: bigint | null = null;
  const what = argv.join(' ');
  for (;;) {
    const stop: TraceStop | 'timeout' = await tracer.next(deadline);
    if (stop === 'timeout') {
      if (execs > 0)
        return err(
          mqdError(
            'MQD_E_EMPTY_PROCTABLE',
            `the starter (pid ${pid}) did not reach MPIR_Breakpoint within ${timeoutMs} ms`,
          ),
        );
      return err(mqdError('MQD_E_BAD_INPUT', `'${what}' did not start within ${timeoutMs} ms`));
    }
    switch (stop.kind) {
      case 'exit': {
        const how = stop.signal !== null ? `signal ${stop.signal}` : `code ${stop.code}`;
        if (execs === 0)
          return err(
            mqdError('MQD_E_BAD_INPUT', `could not start '${what}': the launch shell exited with ${how}`),
          );
        return err(
          mqdError(
            'MQD_E_JOB_ENDED',
            `the starter '${what}' exited (${how}) before it published its process table`,
          ),
        );
      }
      case 'exec': {
        execs++;
        entry = entryPoint(pid);
        if (entry === null)
          return err(mqdError('MQD_E_STOP_FAILED', `cannot read the entry point of pid ${pid}`));
        const e = tracer.arm(entry);
        if (e) return err(e);
        phase = 'entry';
        tracer.resume(pid, 0);
        break;
      }
      case 'breakpoint': {
        if (phase === 'entry' && stop.address === entry) {
          const e = tracer.disarm(entry);
          if (e) return err(e);
          const loaded = ProcessImage.load(pid, registry);
          if (!loaded.ok) return loaded;
          image = loaded.value;
          const syms = mpirSymbols(image);
          if (!syms || syms.breakpoint === null) {
            const pmix = pmixStarterKind(image);
            if (EXECERS.test(basename(image.exe)) || pmix === 'execs-prterun') {
              // A wrapper (a script's interpreter, env, nice, ..., Open MPI 5's mpirun): the
              // starter is its next exec.
              phase = 'exec';
              tracer.resume(stop.tid, 0);
              break;
            }
            if (pmix === 'prterun') {
              // Held at its entry point: nothing has run. It is started again with its ranks
              // held for a PMIx tool (pmix-launch.ts).
              const starter = capturePmixStarter(pid, image);
              if (!starter.ok) return starter;
              return ok({ kind: 'pmix', starter: starter.value });
            }
            return err(
              mqdError(
                'MQD_E_NOT_STARTER',
                `'${image.exe}' has no MPIR_proctable/MPIR_Breakpoint symbols: it is not an MPI starter with MPIR support (the job was killed)`,
              ),
            );
          }
          if (syms.beingDebugged !== null) {
            const w = tracer.writeInt32(syms.beingDebugged, 1);
            if (w) return err(w);
          }
          const a = tracer.arm(syms.breakpoint);
          if (a) return err(a);
          mpirBreakpoint = syms.breakpoint;
          phase = 'mpir';
          tracer.resume(stop.tid, 0);
          break;
        }
        if (phase === 'mpir' && stop.address === mpirBreakpoint && image) {
          // The thread stays stopped on MPIR_Breakpoint until release(); the rest run on.
          const e = tracer.disarm(stop.address);
          if (e) return err(e);
          const syms = mpirSymbols(image);
          const starter = starterInfo(pid);
          if (!starter.ok) return starter;
          if (!syms) return err(mqdError('MQD_E_INTERNAL', 'MPIR symbols vanished between two stops'));
          const table = readMpirTable(image, starter.value, syms, here);
          if (!table.ok) return table;
          found.job = table.value;
          const value = opts.atBreakpoint ? await opts.atBreakpoint(table.value) : undefined;
          return ok({ kind: 'mpir', job: table.value, value });
        }
        return err(
          mqdError(
            'MQD_E_INTERNAL',
            `unexpected breakpoint at 0x${stop.address.toString(16)} in phase ${phase}`,
          ),
        );
      }
      default:
        stop satisfies never;
    }
  }
}

/**
 * Starts `argv` (e.g. ['mpirun', '-np', '4', './app']) under the tool, stops it at
 * MPIR_Breakpoint, reads the process table, runs `atBreakpoint`, and lets the job run.
 */
export async function launchUnderTool<T = undefined>(
  argv: readonly string[],
  opts: LaunchOptions<T> = {},
): Promise<Result<LaunchedJob<T>, MqdError>> {
  if (!pt.BREAKPOINTS_SUPPORTED) {
    return err(
      mqdError(
        'MQD_E_BAD_INPUT',
        `launching under the tool needs x86_64 (this is ${process.arch}); attach instead`,
      ),
    );
  }
  const [program] = argv;
  if (program === undefined || program === '')
    return err(mqdError('MQD_E_USAGE', 'give the starter command to run'));
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  if (findExecutable(program, env['PATH'], cwd) === null)
    return err(
      mqdError('MQD_E_BAD_INPUT', `'${program}' is not an executable file (PATH and ${cwd} searched)`),
    );
  const timeoutBin = findExecutable('timeout', process.env['PATH'], cwd);
  if (timeoutBin === null)
    return err(
      mqdError('MQD_E_BAD_INPUT', "coreutils' timeout is not on PATH; it supervises the launched starter"),
    );
  const registry = opts.registry ?? new DebugFileRegistry();
  const here = opts.here ?? localHost();

  const stdio = opts.stdio ?? 'inherit';
  const child = spawn(
    timeoutBin,
    ['--foreground', '0', '/bin/sh', '-c', WRAPPER_SCRIPT, 'mqd-launch', ...argv],
    {
      cwd,
      env,
      stdio: stdio === 'pipe' ? ['ignore', 'pipe', 'pipe', 'pipe'] : [stdio, stdio, stdio, 'pipe'],
    },
  );
  const spawned = await new Promise<Error | null>((res) => {
    child.once('spawn', () => res(null));
    child.once('error', (e) => res(e));
  });
  if (spawned) return err(mqdError('MQD_E_BAD_INPUT', `cannot start ${timeoutBin}: ${spawned.message}`));
  const wrapper = new Wrapper(child);
  const pid = await wrapper.readPid(PID_LINE_TIMEOUT_MS);
  if (pid === null) {
    if (child.pid !== undefined) kill(child.pid, 'SIGKILL');
    await wrapper.wait();
    return err(mqdError('MQD_E_BAD_INPUT', `the launch wrapper did not start: ${wrapper.output().trim()}`));
  }
  const tracer = Tracer.seize(pid);
  if (!(tracer instanceof Tracer)) {
    await killTree(pid, wrapper);
    return err(tracer);
  }

  let outcome: Result<Drove<T>, MqdError>;
  // The table once read, so that a failure after it can also kill ranks already reparented.
  const found: { job: JobRanks | null } = { job: null };
  const tablePids = () => found.job?.ranks.map((r) => r.pid as number) ?? [];
  try {
    wrapper.go();
    outcome = await drive(tracer, argv, opts, registry, here, found);
  } catch (e) {
    // A bug, or the callback threw: nothing may stay stopped or traced, and the job goes.
    tracer.release();
    await killTree(pid, wrapper, tablePids());
    throw e;
  }
  const problem = tracer.release();
  if (!outcome.ok || problem) {
    await killTree(pid, wrapper, tablePids());
    return outcome.ok ? err(problem ?? mqdError('MQD_E_INTERNAL', 'release failed')) : outcome;
  }
  if (outcome.value.kind === 'pmix') {
    // prterun at its entry point, not yet run: that attempt goes, the held launch replaces it.
    await killTree(pid, wrapper);
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    return launchUnderPmix(outcome.value.starter, opts, here, timeoutBin, Date.now() + timeoutMs, timeoutMs);
  }
  let job = outcome.value.job;
  if (readEnviron(pid)?.has('MPIEXEC_DEBUG')) {
    const warnings = await releaseGates(job, here, registry, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    if (warnings.length > 0) job = { ...job, warnings: [...job.warnings, ...warnings] };
  }
  return ok(launchedJob(pid, wrapper, job, outcome.value.value));
}
