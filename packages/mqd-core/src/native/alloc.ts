// Every native (koffi) allocation of MQD goes through here, so each has an owner and can be
// counted (a reader once grew ~34 KB per snapshot from blocks nobody freed). Three kinds:
// - permanent: C keeps a pointer to it for the life of the process (callback tables, Dwfl
//   callbacks, strings handed to a DLL); allocated once per owner, never freed;
// - owned: scratch that belongs to an object (a DebugFile, an Unwinder) and is freed by its
//   dispose;
// - scoped: lives for one call (withScratch) and is freed when it returns, whatever happens.
// `nativeAllocations()` reports the blocks alive now; tests assert it does not grow per snapshot.
// The koffi-free read buffers (TypedArrays handed to a call) need none of this.
import koffi from 'koffi';

type KoffiType = Parameters<typeof koffi.alloc>[0];

let permanent = 0;
let live = 0;

/** A block C may keep a pointer to until the process exits. Keep a JS reference to it too. */
export function permanentAlloc(type: KoffiType, count: number): unknown {
  permanent++;
  return koffi.alloc(type, count);
}

/** A block its owner frees with `nativeFree` (in its dispose). */
export function ownedAlloc(type: KoffiType, count: number): unknown {
  live++;
  return koffi.alloc(type, count);
}

export function nativeFree(block: unknown): void {
  live--;
  koffi.free(block);
}

/** Runs `fn` with an allocator whose blocks are all freed when `fn` returns or throws. */
export function withScratch<T>(fn: (alloc: (type: KoffiType, count: number) => unknown) => T): T {
  const blocks: unknown[] = [];
  try {
    return fn((type, count) => {
      const b = ownedAlloc(type, count);
      blocks.push(b);
      return b;
    });
  } finally {
    for (const b of blocks) nativeFree(b);
  }
}

/** Native blocks alive now: `owned` ones (scratch and per-object) and `permanent` ones. */
export function nativeAllocations(): { readonly owned: number; readonly permanent: number } {
  return { owned: live, permanent };
}
