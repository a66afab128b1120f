// The footer names the library that read the snapshot, not the DLL's absolute path.
import type { RankSnapshot } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { dllVersionOf, libraryLabel } from '../src/Footer.js';

describe('libraryLabel', () => {
  it('takes the version from an MPICH DLL’s version string and keeps the path for the tooltip', () => {
    const dll = '/var/cache/mqd-mpi/mpich-4.2.1/lib/libtvmpich.so';
    const version = 'MPICH message queue support for MPICH 4.2.1 compiled on (build date)';
    const l = libraryLabel({ library: 'mpich', dll, lengthUnit: 'elements' }, version);
    expect(l.text).toBe('MPICH 4.2.1 · libtvmpich.so');
    expect(l.text).not.toContain('/');
    expect(l.title).toBe(`${dll}\n${version}`);
  });

  it('takes the version from the install path when the DLL’s string has none (Open MPI)', () => {
    const dll = '/var/cache/mqd-mpi/openmpi-4.1.4/lib/openmpi/libompi_dbg_msgq.so';
    const version = 'Open MPI message queue support for parallel debuggers compiled on Oct  2 2026';
    const l = libraryLabel({ library: 'openmpi', dll, lengthUnit: 'bytes' }, version);
    expect(l.text).toBe('Open MPI 4.1.4 · libompi_dbg_msgq.so');
  });

  it('leaves the version out when nothing says it', () => {
    const dll = '/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi/libompi_dbg_msgq.so';
    expect(libraryLabel({ library: 'openmpi', dll, lengthUnit: 'bytes' }, null)).toEqual({
      text: 'Open MPI · libompi_dbg_msgq.so',
      title: dll,
    });
  });

  it('says when no DLL was loaded', () => {
    expect(libraryLabel({ library: 'unknown', dll: null, lengthUnit: 'bytes' }, null).text).toBe(
      'Unknown MPI library · no message-queue DLL',
    );
  });
});

describe('dllVersionOf', () => {
  it('is the first read rank’s DLL version, null when no rank says', () => {
    const rank = (dll?: { path: string; version: string }): RankSnapshot => ({
      rank: 0,
      pid: 1,
      host: 'n',
      state: { kind: 'ok' },
      pausedMicros: 0,
      communicators: [],
      ...(dll ? { dll } : {}),
    });
    expect(dllVersionOf({ ranks: [rank(), rank({ path: '/x.so', version: 'v 1.2' })] })).toBe('v 1.2');
    expect(dllVersionOf({ ranks: [rank()] })).toBeNull();
    expect(dllVersionOf(null)).toBeNull();
  });
});
