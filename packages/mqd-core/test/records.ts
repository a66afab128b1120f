// mqs_pending_operation records written byte by byte in the layout of src/mqs/mqs-spec.ts, as
// a DLL writes them (decode.test.ts, wire.test.ts).
import { mqs_status, PENDING_OPERATION as P } from '../src/mqs/mqs-spec.js';

export interface Rec {
  status?: number;
  local?: number;
  global?: number;
  tagWild?: boolean;
  tag?: number;
  length?: bigint;
  buffer?: bigint;
  systemBuffer?: boolean;
  actualLocal?: number;
  actualGlobal?: number;
  actualTag?: number;
  actualLength?: bigint;
  extra?: string[];
}

/** A target int the DLL widened into 8 bytes (no sign extension). */
export function widened(v: DataView, off: number, x: number): void {
  v.setInt32(off, x, true);
  v.setInt32(off + 4, 0, true);
}

/** One mqs_pending_operation record as a DLL writes it (mqs-spec.ts layout). */
export function record(f: Rec): Buffer {
  const b = Buffer.alloc(P.size);
  const v = new DataView(b.buffer, b.byteOffset, P.size);
  v.setInt32(P.status, f.status ?? mqs_status.pending, true);
  widened(v, P.desired_local_rank, f.local ?? 1);
  widened(v, P.desired_global_rank, f.global ?? 1);
  v.setInt32(P.tag_wild, f.tagWild ? 1 : 0, true);
  widened(v, P.desired_tag, f.tag ?? 7);
  v.setBigInt64(P.desired_length, f.length ?? 4n, true);
  v.setInt32(P.system_buffer, f.systemBuffer ? 1 : 0, true);
  v.setBigUint64(P.buffer, f.buffer ?? 0x1000n, true);
  widened(v, P.actual_local_rank, f.actualLocal ?? 0);
  widened(v, P.actual_global_rank, f.actualGlobal ?? -1);
  widened(v, P.actual_tag, f.actualTag ?? -1);
  v.setBigInt64(P.actual_length, f.actualLength ?? 0n, true);
  (f.extra ?? []).forEach((line, i) => {
    b.write(line, P.extra_text + i * P.extraLineLen, 'utf8');
  });
  return b;
}
