// The expressions a snapshot asks for, read on one rank in its stop: the frame each names (by
// function, or the innermost user frame: outside the MPI and C libraries, on the thread in the
// MPI call), its registers from the unwinder, the names resolved and the values read through
// the stop's memory. A bad expression, an unknown name, an optimized-out variable or an unreadable
// address is that expression's coded message on this rank; nothing here throws to the caller.
import {
  clipText,
  type EvalRequest,
  findMpiCall,
  MAX_EVAL_EXPR_CHARS,
  MAX_EVAL_EXPRESSIONS,
  type MqdError,
  mqdError,
  type RankValue,
  type ThreadStack,
  threadUserFrame,
} from '@mqd/model';
import type { ProcessImage } from '../inferior/process-image.js';
import type { Unwinder } from '../inferior/unwind.js';
import type { RankMemory } from '../mqs/libraries/library.js';
import { TypeDecoder } from './dwarf-types.js';
import { evaluate } from './evaluate.js';
import { parseExpr } from './expr.js';
import { type FrameSite, frameScope, ScopeScratch } from './scope.js';
import { EvalFailure } from './value.js';

/** RankValue.frame's limit (a function name, as Frame.function). */
const MAX_FRAME_CHARS = 1024;

export interface RankValuesInput {
  readonly pid: number;
  readonly image: Pick<ProcessImage, 'dwarfAt' | 'moduleAt' | 'findSymbol' | 'findType'>;
  readonly mem: Pick<RankMemory, 'bytes'>;
  /** The rank's stacks read in this stop (null: not read: only globals are visible). */
  readonly threads: readonly ThreadStack[] | null;
  readonly unwinder: Pick<Unwinder, 'frameRegisters'> | null;
}

/** Reads expressions on stopped ranks; owns its native scratch (dispose frees it). */
export class ValueReader {
  private readonly types = new TypeDecoder();
  private readonly scratch = new ScopeScratch();

  dispose(): void {
    this.types.dispose();
    this.scratch.dispose();
  }

  /** Every requested expression's value or coded message on this rank, in request order. */
  read(evals: readonly EvalRequest[], r: RankValuesInput): RankValue[] {
    // Types decoded in an earlier stop may name files closed since.
    this.types.clear();
    const out: RankValue[] = [];
    const sites = new Map<string, { site: FrameSite | null; frame: string | null } | MqdError>();
    for (const asked of evals.slice(0, MAX_EVAL_EXPRESSIONS)) {
      // What comes back stays within the format's limits whatever was asked (parseExpr refuses
      // a longer expression with its code).
      const req: EvalRequest = {
        expr: clipText(asked.expr, MAX_EVAL_EXPR_CHARS),
        ...(asked.frame !== undefined ? { frame: clipText(asked.frame, MAX_FRAME_CHARS) } : {}),
      };
      const parsedLong = asked.expr.length > MAX_EVAL_EXPR_CHARS;
      const key = req.frame ?? '';
      let chosen = sites.get(key);
      if (chosen === undefined) {
        chosen = this.chooseFrame(req.frame ?? null, r);
        sites.set(key, chosen);
      }
      const v = parsedLong ? this.tooLong(req, asked.expr.length) : this.one(req, chosen, r);
      // The mark travels with the value: the analysis reads the counter from the snapshot alone.
      out.push(asked.progress === true ? { ...v, progress: true } : v);
    }
    return out;
  }

  private tooLong(req: EvalRequest, length: number): RankValue {
    const error = mqdError(
      'MQD_E_EVAL_SYNTAX',
      `column ${MAX_EVAL_EXPR_CHARS + 1}: the expression is ${length} characters, more than ${MAX_EVAL_EXPR_CHARS}`,
    );
    return { expr: req.expr, frame: req.frame ?? null, error: coded(error) };
  }

  private one(
    req: EvalRequest,
    chosen: { site: FrameSite | null; frame: string | null } | MqdError,
    r: RankValuesInput,
  ): RankValue {
    const parsed = parseExpr(req.expr);
    if ('code' in chosen) return { expr: req.expr, frame: req.frame ?? null, error: coded(chosen) };
    if (!parsed.ok) return { expr: req.expr, frame: chosen.frame, error: coded(parsed.error) };
    try {
      const scope = frameScope(chosen.site, r.image, this.types, this.scratch);
      const value = evaluate(parsed.expr, { scope, mem: r.mem, image: r.image, types: this.types });
      return { expr: req.expr, frame: chosen.frame, value };
    } catch (e) {
      const error =
        e instanceof EvalFailure
          ? e.error
          : mqdError('MQD_E_INTERNAL', `evaluating "${req.expr}" on pid ${r.pid}: ${(e as Error).message}`);
      return { expr: req.expr, frame: chosen.frame, error: coded(error) };
    }
  }

  /** The frame `fn` names (or the innermost user frame), with its registers from the unwinder. */
  private chooseFrame(
    fn: string | null,
    r: RankValuesInput,
  ): { site: FrameSite | null; frame: string | null } | MqdError {
    const threads = r.threads;
    if (threads === null || threads.length === 0 || r.unwinder === null) {
      if (fn !== null) {
        return mqdError(
          'MQD_E_EVAL_FRAME',
          `the stacks of pid ${r.pid} were not read, so no frame of ${fn} can be chosen`,
        );
      }
      return { site: null, frame: null };
    }
    const pick = fn === null ? userPick(threads) : functionPick(threads, fn);
    if (pick === null) {
      if (fn === null) return { site: null, frame: null };
      return mqdError('MQD_E_EVAL_FRAME', `no thread of pid ${r.pid} has a frame of ${fn}`);
    }
    const { thread, index } = pick;
    let physical = 0;
    for (let i = 0; i < index; i++) if (!thread.frames[i]?.inlined) physical++;
    let inlineDepth = 0;
    for (let i = index - 1; i >= 0 && thread.frames[i]?.inlined; i--) inlineDepth++;
    const regs = r.unwinder.frameRegisters(r.pid, thread.tid, physical);
    const name = thread.frames[index]?.function ?? null;
    if (regs === null) {
      return mqdError(
        'MQD_E_EVAL_FRAME',
        `the registers of frame #${index} (${name ?? '??'}) of thread ${thread.tid} could not be recovered`,
      );
    }
    const pc = physical === 0 ? regs.pc : regs.pc - 1n;
    return { site: { regs, pc, inlineDepth }, frame: name };
  }
}

function coded(e: MqdError): { code: string; message: string } {
  return { code: e.code, message: e.message };
}

/** Threads in the order a frame is searched: the one in the MPI call, the main thread, the others. */
function ordered(threads: readonly ThreadStack[]): ThreadStack[] {
  const call = findMpiCall(threads);
  return [...threads].sort((a, b) => rankOf(a) - rankOf(b));
  function rankOf(t: ThreadStack): number {
    return t.tid === call?.tid ? 0 : t.main ? 1 : 2;
  }
}

function userPick(threads: readonly ThreadStack[]): { thread: ThreadStack; index: number } | null {
  for (const t of ordered(threads)) {
    const u = threadUserFrame(t);
    if (u !== null) return { thread: t, index: u.index };
  }
  return null;
}

/** A frame's function is `fn`: the same name, or the same before a C++ parameter list. */
export function functionMatches(name: string | null, fn: string): boolean {
  if (name === null) return false;
  if (name === fn) return true;
  const paren = name.indexOf('(');
  const bare = paren > 0 ? name.slice(0, paren) : name;
  return bare === fn || bare.endsWith(`::${fn}`);
}

function functionPick(
  threads: readonly ThreadStack[],
  fn: string,
): { thread: ThreadStack; index: number } | null {
  for (const t of ordered(threads)) {
    const i = t.frames.findIndex((f) => functionMatches(f.function, fn));
    if (i >= 0) return { thread: t, index: i };
  }
  return null;
}
