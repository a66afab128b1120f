// DWARF DIEs copied out of libdw (a DIE is plain data valid while its Dwarf is), and the
// concrete scopes of a pc: the DIEs that hold the innermost scope dwarf_getscopes gives, found by
// offset (past an inlined instance dwarf_getscopes follows the inline's abstract origin).
// Shared by the unwinder's inlined frames (unwind.ts) and the argument plans (frame-args.ts).
// Also the gdb-like source line of a pc from a compilation unit's line table.
import koffi from 'koffi';
import { DIE_SIZE, dw } from '../native/libdw.js';

/** A copy of the i-th DIE of an array of them (a DIE is plain data valid while its Dwarf is). */
export function dieBytes(ptr: unknown, i: number): Uint8Array {
  return new Uint8Array(koffi.view(ptr, (i + 1) * DIE_SIZE)).slice(i * DIE_SIZE, (i + 1) * DIE_SIZE);
}

export function setDie(bytes: Uint8Array | undefined, into: unknown): void {
  if (bytes) new Uint8Array(koffi.view(into, DIE_SIZE)).set(bytes);
}

export function copyDie(scopesPtr: unknown, i: number, into: unknown): void {
  const bytes = new Uint8Array(koffi.view(scopesPtr, (i + 1) * DIE_SIZE)).subarray(i * DIE_SIZE);
  new Uint8Array(koffi.view(into, DIE_SIZE)).set(bytes.subarray(0, DIE_SIZE));
}

/**
 * The DIEs from the one at `target` out to the compilation unit, innermost first, found by
 * descending from the unit: a DIE's children lie between its offset and its next sibling's,
 * so the holder at each level is the last child not past the target. Empty if not found.
 * `cur` and `child` are scratch DIEs of the caller.
 */
export function concreteScopes(cudie: unknown, target: bigint, cur: unknown, child: unknown): Uint8Array[] {
  const chain: Uint8Array[] = [dieBytes(cudie, 0)];
  setDie(chain[0], cur);
  for (let depth = 0; depth < 64; depth++) {
    if ((dw.dwarf_child(cur, child) as number) !== 0) return [];
    let best: Uint8Array | null = null;
    let bestOff = -1n;
    do {
      const off = BigInt(dw.dwarf_dieoffset(child) as number | bigint);
      if (off > target) break;
      best = dieBytes(child, 0);
      bestOff = off;
    } while ((dw.dwarf_siblingof(child, child) as number) === 0);
    if (best === null) return [];
    chain.push(best);
    if (bestOff === target) return chain.reverse();
    setDie(best, cur);
  }
  return [];
}

/**
 * The source position of `addr` (a pc less its module's bias) in `cudie`'s line table, the way
 * gdb gives it: the last row at the highest address at or below `addr` and, when that row is not a statement (is_stmt), the last statement
 * row at that same address. GCC often puts several rows on one address (the inlined callee's
 * line and the caller's); libdw's dwfl_module_getsrc takes the last of them, statement or not,
 * so MQD said mpid_nem_queue.h:140 where gdb says mpl_atomic_c11.h:104. Null when the CU has
 * no line-table row for `addr` (the caller then asks libdw).
 */
export function statementLine(
  cudie: unknown,
  addr: bigint,
): { file: string | null; line: number | null } | null {
  const linesOut: unknown[] = [null];
  const countOut = [0n];
  if ((dw.dwarf_getsrclines(cudie, linesOut, countOut) as number) !== 0) return null;
  const lines = linesOut[0];
  const n = Number(countOut[0]);
  const u64 = [0n];
  const flag = [false];
  const rowAddr = (i: number): bigint | null => {
    const row = dw.dwarf_onesrcline(lines, i);
    return row && (dw.dwarf_lineaddr(row, u64) as number) === 0 ? (u64[0] ?? null) : null;
  };
  const isStmt = (i: number): boolean => {
    const row = dw.dwarf_onesrcline(lines, i);
    return !!row && (dw.dwarf_linebeginstatement(row, flag) as number) === 0 && flag[0] === true;
  };
  // libdw keeps the rows sorted by address, those at one address in table order.
  let lo = 0;
  let hi = n - 1;
  let best = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const a = rowAddr(mid);
    if (a === null) return null;
    if (a <= addr) {
      best = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  if (best < 0) return null;
  const at = rowAddr(best);
  const endRow = dw.dwarf_onesrcline(lines, best);
  if (!endRow || (dw.dwarf_lineendsequence(endRow, flag) as number) !== 0 || flag[0] === true) return null;
  if (!isStmt(best)) {
    let k = best;
    while (k > 0 && rowAddr(k - 1) === at && !isStmt(k)) k--;
    if (isStmt(k)) best = k;
  }
  const row = dw.dwarf_onesrcline(lines, best);
  if (!row) return null;
  const lineOut = [0];
  const line = (dw.dwarf_lineno(row, lineOut) as number) === 0 ? (lineOut[0] ?? 0) : 0;
  const file = (dw.dwarf_linesrc(row, null, null) as string | null) ?? null;
  return { file, line: line > 0 ? line : null };
}
