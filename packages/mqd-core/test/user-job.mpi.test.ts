// A real MPI job run by an unprivileged user (uid 65534 via setpriv) and read by a root
// Snapshotter acting for that user (ownerUid 65534): the queues are the expected ones and every
// reader child ran as 65534 with no groups and NO_NEW_PRIVS. The MPI cache, the fixtures and
// the checkout are world-readable; the user gets a writable HOME/TMPDIR of their own.
import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { JobSnapshot } from '@mqd/model';
import {
  done,
  expectedQueues,
  fixtureBinary,
  MPI_NAMES,
  parseReadyLines,
  pending,
  type RankProcess,
  starterCommand,
  waitFor,
} from '@mqd/testkit';
import { describe, expect, it } from 'vitest';
import { Snapshotter } from '../src/index.js';
import { NOBODY } from './security-kit.js';

const NP = 4;
const FIXTURE = 'ring_ssend';

/**
 * The queues of a snapshot on the communicators the expected tables name, in their shape
 * (local peer, tag, length, status); the library's other communicators must be empty.
 */
function queuesOf(s: JobSnapshot, named: readonly (readonly string[])[]) {
  return s.ranks.map((r) =>
    r.communicators
      .filter((c) => {
        const mine = named[r.rank]?.includes(c.name) ?? false;
        if (!mine)
          expect([c.name, c.sends ?? [], c.receives ?? [], c.unexpected ?? []]).toEqual([c.name, [], [], []]);
        return mine;
      })
      .map((c) => ({
        name: c.name,
        sends: c.sends?.map((o) => [o.peer.local, o.tag, o.length, o.status]) ?? null,
        receives: c.receives?.map((o) => [o.peer.local, o.tag, o.length, o.status]) ?? null,
        unexpected: c.unexpected?.map((o) => [o.peer.local, o.tag, o.length, o.status]) ?? null,
      })),
  );
}

// The readers' credentials are MQD's security control, the same under every MPI: one build
//; the queues it compares are apps/cli/test/golden.mpi.test.ts's under every build.
describe.each(MPI_NAMES.slice(0, 1))('%s: a job of uid 65534 read by a root agent for that user', (mpi) => {
  it('shows the expected queues, read by a reader running as 65534', async () => {
    const binary = fixtureBinary(mpi, FIXTURE);
    const cmd = starterCommand(mpi, NP, binary);
    const home = mkdtempSync('/tmp/mqd-user-');
    chownSync(home, NOBODY, NOBODY);
    let out = '';
    const starter: ChildProcess = spawn(
      'setpriv',
      [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', cmd.file, ...cmd.args],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true, // its own process group: the whole job is killed by group in finally
        env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, TMPDIR: home, ...cmd.env },
      },
    );
    starter.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    starter.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const s = new Snapshotter();
    let ranks: RankProcess[] = [];
    try {
      ranks = await waitFor(
        () => {
          if (starter.exitCode !== null) throw new Error(`the starter exited: ${out}`);
          const r = parseReadyLines(out);
          return r.length === NP ? done(r) : pending(`${r.length} READY lines`);
        },
        { timeoutMs: 60_000, what: `${NP} READY lines` },
      );
      for (const r of ranks)
        expect(readFileSync(`/proc/${r.pid}/status`, 'utf8')).toMatch(
          /^Uid:\s+65534\s+65534\s+65534\s+65534$/m,
        );
      const expected = expectedQueues(mpi, FIXTURE, NP);
      const named = expected.map((comms) => comms.map((c) => c.name));
      const want = expected.map((comms) =>
        comms.map((c) => ({
          name: c.name,
          sends: c.sends?.map((o) => [o.peer, o.tag, o.length, o.status]) ?? null,
          receives: c.receives?.map((o) => [o.peer, o.tag, o.length, o.status]) ?? null,
          unexpected: c.unexpected?.map((o) => [o.peer, o.tag, o.length, o.status]) ?? null,
        })),
      );
      // The ranks print READY just before they block: read until the queues settle (or time out).
      let last: JobSnapshot | null = null;
      await waitFor(
        async () => {
          last = (
            await s.snapshot(
              ranks.map((r) => ({ pid: r.pid, rank: r.rank })),
              { ownerUid: NOBODY },
            )
          ).snapshot;
          return JSON.stringify(queuesOf(last, named)) === JSON.stringify(want)
            ? done(true)
            : pending('queues');
        },
        { timeoutMs: 30_000, what: 'the expected queues' },
      ).catch(() => undefined);
      const snap = last as JobSnapshot | null;
      expect(snap?.ranks.map((r) => r.state)).toEqual(ranks.map(() => ({ kind: 'ok' })));
      expect(snap ? queuesOf(snap, named) : null).toEqual(want);
      const readers = s.readerCredentials();
      expect(readers.length).toBeGreaterThan(0);
      for (const c of readers) {
        expect(c).toMatchObject({ uid: NOBODY, euid: NOBODY, gid: NOBODY, groups: [], noNewPrivs: true });
        expect(readFileSync(`/proc/${c.pid}/status`, 'utf8')).toMatch(
          /^Uid:\s+65534\s+65534\s+65534\s+65534$/m,
        );
      }
    } finally {
      await s.dispose();
      try {
        if (starter.pid) process.kill(-starter.pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
      for (const r of ranks) {
        try {
          process.kill(r.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      rmSync(home, { recursive: true, force: true });
    }
  });
});
