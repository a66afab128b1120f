// The corners of the MQD interface text against our conformance DLL and
// target: the cases no real library produces on demand. Each test names its corner; the list
// is in the package's REFERENCE.md ("Interface corners").
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type JobSnapshot, type RankSnapshot, validateSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { formatSnapshot } from '../src/format.js';
import { LP64_SIZES, targetTypeSizes } from '../src/inferior/type-sizes.js';
import { substituteName } from '../src/mqs/walk.js';
import { buildConformance, snapshottersPerTest, startTarget } from './conformance-kit.js';

const b = buildConformance();
const dllB = b.dll.replace('libmqdtest_dll.so', 'libmqdtest_dll_b.so');
const work = mkdtempSync(join(tmpdir(), 'mqd-corners-'));
const snapshotter = snapshottersPerTest();

const rankOf = (s: JobSnapshot, r: number): RankSnapshot => {
  const x = s.ranks.find((y) => y.rank === r);
  if (!x) throw new Error(`rank ${r} missing`);
  return x;
};

async function readMode(mode: number, rank = 0): Promise<{ snapshot: JobSnapshot; r: RankSnapshot }> {
  const t = await startTarget(b.target, b.dll, mode, rank);
  const { snapshot } = await snapshotter().snapshot([{ pid: t.pid, rank }]);
  return { snapshot, r: rankOf(snapshot, rank) };
}

describe('interface corners', () => {
  it('corner 1: failed callbacks answer mqs_no_information, our diagnosis stays ours', async () => {
    // The DLL's mqs_setup_process fails with err_private_code unless a missing symbol, a missing
    // function and a read of address 0 each return exactly mqs_no_information (1).
    const { r } = await readMode(0);
    expect(r.state).toEqual({ kind: 'ok' });
    // A walk broken by an unreadable pointer: the DLL passes on code 1; the message adds where.
    const bad = await readMode(5, 3);
    expect(bad.r.state.kind).toBe('error');
    if (bad.r.state.kind !== 'ok') {
      expect(bad.r.state.message).toMatch(/mqs_next_operation returned 1 \(debugger: no information/);
      expect(bad.r.state.message).toMatch(
        /debugger: a read of target memory failed \(unmapped\), the first at 0x10/,
      );
      expect(bad.r.state.message).not.toMatch(/100[0-9]/);
    }
  });

  it('corner 2: a failing mqs_get_communicator makes the rank an error with the DLL message', async () => {
    const { snapshot, r } = await readMode(8);
    expect(validateSnapshot(snapshot).ok).toBe(true);
    expect(r.state).toMatchObject({ kind: 'error', code: 'MQD_E_DLL_ERROR' });
    if (r.state.kind !== 'ok') {
      expect(r.state.message).toMatch(
        /mqs_get_communicator \(communicator 2\) returned 105 \(mqdtest: injected failure \(the target asked for it\)\)/,
      );
    }
    // What was read before the failure is kept, and nothing after it is invented.
    expect(r.communicators.map((c) => c.name)).toEqual(['MPI_COMM_WORLD']);
  });

  it('corner 2: a failing mqs_next_communicator makes the rank an error, not "ok" with fewer', async () => {
    const { r } = await readMode(9);
    expect(r.state).toMatchObject({ kind: 'error', code: 'MQD_E_DLL_ERROR' });
    if (r.state.kind !== 'ok') {
      expect(r.state.message).toMatch(
        /mqs_next_communicator \(after communicator 'MPI_COMM_WORLD'\) returned 105 \(mqdtest: injected/,
      );
    }
    expect(r.communicators).toHaveLength(1);
  });

  it('corner 2: a failing mqs_setup_communicator_iterator is an error, not an empty list', async () => {
    const { r } = await readMode(11);
    expect(r.state).toMatchObject({ kind: 'error', code: 'MQD_E_DLL_ERROR' });
    if (r.state.kind !== 'ok')
      expect(r.state.message).toMatch(/mqs_setup_communicator_iterator returned 105 \(mqdtest: injected/);
    expect(r.communicators).toEqual([]);
  });

  it('corner 2: a DLL error from mqs_setup_operation_iterator is that queue\'s error, never "unsupported"', async () => {
    const { snapshot, r } = await readMode(10);
    expect(validateSnapshot(snapshot).ok).toBe(true);
    expect(r.state).toMatchObject({ kind: 'error', code: 'MQD_E_DLL_ERROR' });
    const [world, named] = r.communicators;
    expect(world?.receives).toBeNull();
    expect(world?.unavailable.receives?.code).toBe('MQD_E_DLL_ERROR');
    expect(world?.unavailable.receives?.message).toMatch(
      /mqs_setup_operation_iterator\(receives\) on communicator 'MPI_COMM_WORLD' returned 105 \(mqdtest: injected/,
    );
    expect(named?.unavailable.receives?.code).toBe('MQD_E_DLL_ERROR');
    // The other queues are still read.
    expect(world?.sends).toHaveLength(1);
    expect(world?.unexpected).toHaveLength(1);
    // mqs_no_information stays "unsupported" (mode 7).
    const { r: r7 } = await readMode(7);
    expect(r7.state).toEqual({ kind: 'ok' });
    expect(r7.communicators[0]?.unavailable.unexpected?.code).toBe('MQD_E_QUEUE_UNSUPPORTED');
  });

  it('corner 3: actual fields kept for a matched send; an unknown length is flagged, not a 0 length', async () => {
    const { snapshot, r } = await readMode(13, 2);
    expect(validateSnapshot(snapshot).ok).toBe(true);
    const world = r.communicators[0];
    expect(world?.sends?.[0]).toMatchObject({
      status: 'matched',
      peer: { local: 3, global: 3 },
      actual: { peer: { local: 3, global: 3 }, tag: 42, length: 4 },
    });
    expect(world?.sends?.[0]?.lengthUnknown).toBeUndefined();
    expect(world?.receives?.[0]).toMatchObject({
      status: 'pending',
      length: 0,
      lengthUnknown: true,
      actual: null,
    });
    expect(world?.receives?.[1]?.lengthUnknown).toBeUndefined();
    expect(formatSnapshot(snapshot)).toMatch(/from ANY\s+tag ANY\s+\? /);
  });

  it('corner 4: MPI_COMM_WORLD by identity: a renamed world, a user communicator named MPI_COMM_WORLD', async () => {
    // (validateSnapshot still checks "MPI_COMM_WORLD has no group" by name: snapshot-validate.ts
    // needs isWorld, see REFERENCE.md's corner list; so no validation here.)
    const { r } = await readMode(12, 1);
    const [world, impostor] = r.communicators;
    expect(world).toMatchObject({ id: '0', name: 'renamed_world', world: true, group: null });
    // Its peers are world ranks (local == global) although it is not named MPI_COMM_WORLD.
    expect(world?.sends?.[0]?.peer).toEqual({ local: 2, global: 2 });
    expect(impostor).toMatchObject({ id: '5', name: 'MPI_COMM_WORLD', world: false, group: [3, 1] });
    // Its peers go through its group: local 0 is world rank 3, not 0.
    expect(impostor?.receives?.[0]?.peer).toEqual({ local: 0, global: 3 });
    // And a plain read marks the real world.
    const plain = await readMode(0);
    expect(plain.r.communicators.map((c) => c.world)).toEqual([true, false]);
  });

  it('corner 5: %s in mqs_process_has_queues messages is the process name, %% a percent sign', async () => {
    const { r } = await readMode(6);
    expect(r.state).toMatchObject({ kind: 'no-queues', code: 'MQD_E_NO_QUEUES' });
    if (r.state.kind !== 'ok') {
      expect(r.state.message).toContain(
        `mqdtest: ${b.target} (pid ${r.pid}) was started without queue support (100% sure)`,
      );
      expect(r.state.message).not.toContain('%s');
    }
    expect(substituteName('%s: no %s here, 5%% done %d', 'exe')).toBe('exe: no %s here, 5% done %d');
  });

  it('corner 6: each rank records its DLL (path, version); an MPMD job of two DLLs shows both', async () => {
    const t0 = await startTarget(b.target, b.dll, 0, 0);
    const t1 = await startTarget(b.target, dllB, 0, 1);
    const { snapshot } = await snapshotter().snapshot([
      { pid: t0.pid, rank: 0 },
      { pid: t1.pid, rank: 1 },
    ]);
    expect(validateSnapshot(snapshot).ok).toBe(true);
    // The conformance DLL probes a field its target lacks (mqdtest_dll.c): recorded per DLL, so a
    // DLL built for another version of its library shows why its entries may be wrong.
    expect(rankOf(snapshot, 0).dll).toEqual({
      path: b.dll,
      version: 'mqdtest conformance DLL 1.0 (MQD Dashboard tests)',
      missingFields: ['mqdtest_comm_t.no_such_field'],
    });
    expect(rankOf(snapshot, 1).dll).toEqual({
      path: dllB,
      version: 'mqdtest conformance DLL 2.0 (second build)',
      missingFields: ['mqdtest_comm_t.no_such_field'],
    });
    expect(rankOf(snapshot, 1).state).toEqual({ kind: 'ok' });
    const text = formatSnapshot(snapshot);
    expect(text).toContain(`\nrank 1  pid ${t1.pid}`);
    expect(text).toContain(`  DLL: ${dllB} (mqdtest conformance DLL 2.0 (second build))`);
    expect(text).toContain(`  DLL: ${b.dll} (mqdtest conformance DLL 1.0 (MQD Dashboard tests))`);
  });

  it("corner 6: MQD_DEBUG=dll puts the DLL's dprints into the rank as dllLog", async () => {
    const t = await startTarget(b.target, b.dll, 0, 0);
    const script = join(import.meta.dirname, 'snapshot-dll-log.ts');
    const run = (env: NodeJS.ProcessEnv) => {
      const r = spawnSync(
        process.execPath,
        ['--conditions=source', '--import', 'tsx', script, String(t.pid)],
        {
          encoding: 'utf8',
          env: { ...process.env, ...env },
        },
      );
      expect(r.status, r.stderr).toBe(0);
      return JSON.parse(r.stdout.trim().split('\n').pop() ?? 'null') as { state: string; dllLog?: string[] };
    };
    const on = run({ MQD_DEBUG: 'dll' });
    expect(on.state).toBe('ok');
    expect(on.dllLog).toEqual(['mqdtest: image has queues']);
    const off = run({ MQD_DEBUG: '' });
    expect(off.state).toBe('ok');
    expect(off.dllLog).toBeUndefined();
  });

  it('corner 8: the DLL found without MPIR_dll_name: mpimsgq_dll_locations, then the install path', async () => {
    // An empty MPIR_dll_name; the first location does not exist, the second is the DLL.
    const t = await startTarget(b.target, '', 0, 0, {
      MQDTEST_DLL_LOCATIONS: `${join(work, 'no-such-dll.so')}:${b.dll}`,
    });
    const viaList = await snapshotter().snapshot([{ pid: t.pid, rank: 0 }]);
    expect(viaList.snapshot.mpi.dll).toBe(b.dll);
    expect(rankOf(viaList.snapshot, 0).state).toEqual({ kind: 'ok' });
    // Neither: the DLL an Open MPI installation keeps beside its library (<libdir>/openmpi/).
    const dir = join(work, 'installed');
    mkdirSync(join(dir, 'openmpi'), { recursive: true });
    copyFileSync(b.target, join(dir, 'mqdtest_target'));
    copyFileSync(b.lib, join(dir, 'libmpi_mqdtest.so'));
    copyFileSync(b.dll, join(dir, 'openmpi', 'libompi_dbg_msgq.so'));
    const t2 = await startTarget(join(dir, 'mqdtest_target'), '', 0, 1);
    const viaInstall = await snapshotter().snapshot([{ pid: t2.pid, rank: 1 }]);
    expect(viaInstall.snapshot.mpi.dll).toBe(join(dir, 'openmpi', 'libompi_dbg_msgq.so'));
    expect(rankOf(viaInstall.snapshot, 1).state).toEqual({ kind: 'ok' });
    // None of the three: a coded error that lists what was tried.
    const t3 = await startTarget(b.target, '', 0, 2);
    const none = await snapshotter().snapshot([{ pid: t3.pid, rank: 2 }]);
    const st = rankOf(none.snapshot, 2).state;
    expect(st).toMatchObject({ kind: 'error', code: 'MQD_E_NO_DLL_NAME' });
    if (st.kind !== 'ok')
      expect(st.message).toMatch(
        /MPIR_dll_name is empty or unreadable; mpimsgq_dll_locations is NULL; no message-queue DLL beside/,
      );
  });

  it('corner 7: type sizes from the target ELF; ILP32 and big-endian targets get a coded error', () => {
    expect(targetTypeSizes(b.target)).toEqual({ ok: true, value: LP64_SIZES });
    const bytes = readFileSync(b.target);
    const ilp32 = join(work, 'target-elf32');
    const big = join(work, 'target-be');
    const b32 = Buffer.from(bytes);
    b32[4] = 1; // EI_CLASS = ELFCLASS32
    writeFileSync(ilp32, b32);
    const bbe = Buffer.from(bytes);
    bbe[5] = 2; // EI_DATA = ELFDATA2MSB
    writeFileSync(big, bbe);
    for (const [path, what] of [
      [ilp32, /is 32-bit little-endian/],
      [big, /is 64-bit big-endian/],
    ] as const) {
      const r = targetTypeSizes(path);
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error.code).toBe('MQD_E_DLL_WRONG_ARCH');
        expect(r.error.message).toMatch(what);
        expect(r.error.message).toMatch(/read this job with a debugger built for its architecture/);
      }
    }
  });
});
