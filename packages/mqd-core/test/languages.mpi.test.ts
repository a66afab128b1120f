// Fortran and C++ versions of ring_ssend, wrong_tag and split_wildcard on
// real MPI jobs: their queues must equal the C fixtures' (the same expected tables the C
// versions are checked against), communicator names set from Fortran show, and every
// communicator carries its Fortran handle — checked against what the program itself holds
// (split_wildcard prints MPI_Comm_c2f of each of its communicators: MQD_FIXTURE_COMM lines).
// Fortran (mpi_f08, `use mpi`, mpif.h, one fixture per binding) and C++ under every provisioned
// MPI with bindings of its own (all but MPICH 4.0.2 ch4, see LANGUAGE_BUILDS): every build is
// configured with gfortran and C++ (scripts/provision.sh).
import type { Communicator, JobSnapshot } from '@mqd/model';
import { validateSnapshot } from '@mqd/model';
import {
  ALL_MPI_NAMES,
  type AnyMpiName,
  expectedQueues,
  type FixtureLanguage,
  type HangFixture,
  languageAvailable,
  mpiAvailable,
  mpiQueueTraits,
  parseCommLines,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { fixtureRig } from './fixture-rig.js';
import { expectQueues } from './queue-checks.js';

const FIXTURES: readonly HangFixture[] = ['ring_ssend', 'wrong_tag', 'split_wildcard'];
/** The binding each Fortran fixture is written with (fixtures/fortran). */
const FORTRAN_BINDING: Record<string, string> = {
  ring_ssend: 'mpi_f08',
  wrong_tag: 'use mpi',
  split_wildcard: 'mpif.h',
};

interface Case {
  readonly mpi: AnyMpiName;
  readonly language: FixtureLanguage;
  readonly fixture: HangFixture;
  readonly label: string;
}

const BUILT = ALL_MPI_NAMES.filter(mpiAvailable);
// MPICH 4.0.2 ch4 is left out: its Fortran and C++ bindings are the ch3 build's, from
// the same 4.0.2 source (the binding layer sits above the device), and a Fortran or C++ program's
// queues are the requests of the C calls the bindings make, which apps/cli/test/golden.mpi.test.ts reads
// under ch4 with the C fixtures. Every other build has bindings of its own version.
const SAME_BINDINGS_AS: Partial<Record<AnyMpiName, AnyMpiName>> = { mpichch4: 'mpich' };
const LANGUAGE_BUILDS = BUILT.filter((mpi) => SAME_BINDINGS_AS[mpi] === undefined);
const CASES: Case[] = [];
for (const mpi of LANGUAGE_BUILDS) {
  for (const language of ['fortran', 'cxx'] as const) {
    if (!languageAvailable(mpi, language)) continue;
    for (const fixture of FIXTURES) {
      const label = language === 'fortran' ? `Fortran (${FORTRAN_BINDING[fixture]})` : 'C++';
      CASES.push({ mpi, language, fixture, label });
    }
  }
}

/** MPI_Comm_c2f(MPI_COMM_WORLD): 0 in Open MPI (its f_to_c table starts with the world), MPICH's builtin handle. */
const WORLD_FORTRAN: Record<'openmpi' | 'mpich', number> = { openmpi: 0, mpich: 0x44000000 };

const rig = fixtureRig();
const { snapshotter } = rig;

const worldOf = (comms: readonly Communicator[]): Communicator | undefined =>
  comms.find((c) => c.world === true);

describe('Fortran and C++ fixtures', () => {
  it('Fortran runs under every provisioned MPI with bindings of its own (each is built with gfortran)', () => {
    const fortran = new Set(CASES.filter((c) => c.language === 'fortran').map((c) => c.mpi));
    expect(LANGUAGE_BUILDS.filter((mpi) => !fortran.has(mpi))).toEqual([]);
    expect(LANGUAGE_BUILDS.length).toBeGreaterThan(0);
  });

  it.each(CASES)("$mpi: $fixture in $label shows the C fixture's queues and Fortran handles", async (c) => {
    const job = await rig.launch({ mpi: c.mpi, fixture: c.fixture, np: 4, language: c.language });
    const { snapshot } = await snapshotter.snapshot(job.ranks.map((r) => ({ pid: r.pid })));
    const valid = validateSnapshot(snapshot);
    expect(valid.ok ? 'valid' : valid.error.message).toBe('valid');
    expect(snapshot.ranks.map((r) => [r.rank, r.state.kind])).toEqual(job.ranks.map((r) => [r.rank, 'ok']));
    expectQueues(c.mpi, mpiQueueTraits(c.mpi), snapshot, expectedQueues(c.mpi, c.fixture, 4));

    const family = snapshot.mpi.library === 'mpich' ? 'mpich' : 'openmpi';
    for (const rank of snapshot.ranks) {
      expect(worldOf(rank.communicators)?.fortranHandle, `rank ${rank.rank} world`).toBe(
        WORLD_FORTRAN[family],
      );
    }
    if (c.fixture === 'split_wildcard') expectHandlesAsPrinted(snapshot, job.output());
  });
});

/** Every communicator the program printed a handle for carries that handle in the snapshot. */
function expectHandlesAsPrinted(snapshot: JobSnapshot, output: string): void {
  const printed = parseCommLines(output);
  expect([...printed.keys()].sort()).toEqual(snapshot.ranks.map((r) => r.rank).sort());
  for (const rank of snapshot.ranks) {
    const names = printed.get(rank.rank);
    expect(names?.size, `rank ${rank.rank} printed its handles`).toBe(3);
    for (const [name, handle] of names ?? []) {
      const comm =
        name === 'MPI_COMM_WORLD'
          ? worldOf(rank.communicators)
          : rank.communicators.find((x) => x.name === name);
      expect(comm, `rank ${rank.rank} lists ${name}`).toBeDefined();
      expect(comm?.fortranHandle, `rank ${rank.rank} ${name}`).toBe(handle);
    }
  }
}
