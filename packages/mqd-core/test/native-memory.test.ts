// Native memory of the reader: every koffi block has an owner (src/native/alloc.ts)
// and the shim's buffers are reused, so N snapshots leave the counts where one left them.
// Reads the conformance target in this process, with stacks (libdw, the unwinder) and the
// DLL's type lookups (sizeof, field_offset), the paths that used to leak.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DebugFileRegistry } from '../src/inferior/debug-file-registry.js';
import { HotPath } from '../src/inferior/shim.js';
import { nativeAllocations } from '../src/native/alloc.js';
import { OneStopReader } from '../src/rank-read/one-stop.js';
import { buildConformance, killAllTargets, startTarget } from './conformance-kit.js';

const b = buildConformance();
afterAll(() => killAllTargets());

const SRC = fileURLToPath(new URL('../src', import.meta.url));
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('native allocations', () => {
  it('go through native/alloc.ts only', () => {
    const raw = sources(SRC).filter(
      (f) => !f.endsWith(join('native', 'alloc.ts')) && /koffi\.alloc\(/.test(readFileSync(f, 'utf8')),
    );
    expect(raw).toEqual([]);
  });

  it('do not grow from snapshot to snapshot (zero outstanding per snapshot)', async () => {
    const t = await startTarget(b.target, b.dll, 0, 1);
    const s = OneStopReader.open(b.dll, {
      registry: new DebugFileRegistry(),
      readBudgetBytes: 1 << 20,
      stopTimeoutMs: 2000,
    });
    if (!s.ok) throw new Error(s.error.message);
    const hot = HotPath.get();
    if (!hot.ok) throw new Error(hot.error.message);
    const snap = () => s.value.snapshotRank({ pid: t.pid, rank: 1, host: 'h' });
    for (let i = 0; i < 3; i++) expect(snap().state.kind).toBe('ok'); // set-up and first-use caches
    const before = { ...nativeAllocations(), shimBytes: hot.value.outstandingBytes() };
    const N = 40;
    for (let i = 0; i < N; i++) {
      const r = snap();
      expect(r.state.kind).toBe('ok');
      expect(r.threads?.length ?? 0).toBeGreaterThan(0); // the unwinder ran in the same stop
    }
    const after = { ...nativeAllocations(), shimBytes: hot.value.outstandingBytes() };
    expect({
      perSnapshot: (after.owned - before.owned) / N,
      permanent: after.permanent - before.permanent,
    }).toEqual({
      perSnapshot: 0,
      permanent: 0,
    });
    expect(after.shimBytes).toBe(before.shimBytes);
    s.value.close();
    t.kill();
  });
});
