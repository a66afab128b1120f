// A value being read (where it lives and its type), the failures an evaluation throws, and the
// scope and context names are resolved in: shared by the evaluator, the renderer and the scopes.
import { type MqdError, mqdError } from '@mqd/model';
import type { ProcessImage } from '../inferior/process-image.js';
import type { RankMemory } from '../mqs/libraries/library.js';
import type { CType, TypeDecoder } from './dwarf-types.js';

/** The most bytes one value may read (a struct, an array, a slice). */
export const MAX_VALUE_BYTES = 4096;

/** A value: where it lives (memory, or bytes already at hand: a register, a constant) and its type. */
export interface Val {
  readonly type: CType;
  readonly addr: bigint | null;
  readonly bytes: Uint8Array | null;
}

/** A failure of one evaluation: thrown inside, returned as the rank's coded message. */
export class EvalFailure extends Error {
  constructor(readonly error: MqdError) {
    super(error.message);
  }
}

export const fail = (code: Parameters<typeof mqdError>[0], detail: string): never => {
  throw new EvalFailure(mqdError(code, detail));
};

/** Where names are looked up: the frame's variables, then the unit's statics, then globals. */
export interface NameScope {
  /** A local, parameter or static visible at the frame's pc; undefined: not there. */
  local(name: string): Val | undefined;
  /** A global of any module by symbol and DWARF type; undefined: no such symbol. */
  global(name: string): Val | undefined;
}

export interface EvalContext {
  readonly scope: NameScope;
  readonly mem: Pick<RankMemory, 'bytes'>;
  readonly image: Pick<ProcessImage, 'findType'>;
  readonly types: TypeDecoder;
}

export function load(v: Val, ctx: Pick<EvalContext, 'mem'>): Val & { bytes: Uint8Array } {
  if (v.bytes !== null) return v as Val & { bytes: Uint8Array };
  if (v.type.kind === 'function' || v.type.kind === 'void') {
    return { ...v, bytes: new Uint8Array(0) };
  }
  if (v.type.size > MAX_VALUE_BYTES) {
    fail(
      'MQD_E_TOO_LARGE',
      `the value is ${v.type.size} bytes, more than the ${MAX_VALUE_BYTES} one value may read: read a member or a slice of it`,
    );
  }
  if (v.addr === null) return fail('MQD_E_EVAL_MEMORY', 'the value has no address');
  const b = v.type.size === 0 ? new Uint8Array(0) : ctx.mem.bytes(v.addr, v.type.size);
  if (b === null) {
    return fail('MQD_E_EVAL_MEMORY', `cannot read ${v.type.size} bytes at 0x${v.addr.toString(16)}`);
  }
  return { ...v, bytes: b };
}

/** A scalar's integer value (ints, chars, bools, enums, pointers). */
export function intOf(v: Val & { bytes: Uint8Array }): bigint {
  const t = v.type;
  const n = Math.min(v.bytes.length, 8);
  let x = 0n;
  for (let i = n - 1; i >= 0; i--) x = (x << 8n) | BigInt(v.bytes[i] ?? 0);
  const signed =
    (t.kind === 'base' && (t.enc === 'signed' || t.enc === 'signed-char')) || (t.kind === 'enum' && t.signed);
  return signed && n > 0 ? BigInt.asIntN(n * 8, x) : x;
}
