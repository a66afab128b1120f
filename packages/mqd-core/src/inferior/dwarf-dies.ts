// DWARF DIEs copied out of libdw (a DIE is plain data valid while its Dwarf is), and the
// concrete scopes of a pc: the DIEs that hold the innermost scope dwarf_getscopes gives, found by
// offset (past an inlined instance dwarf_getscopes follows the inline's abstract origin).
// Shared by the unwinder's inlined frames (unwind.ts) and the argument plans (frame-args.ts).
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
