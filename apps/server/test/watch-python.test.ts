// The hang watch's notification for an mpi4py job: the diagnosis it carries names the Python line
// the ranks wait at, not a frame of the interpreter. The snapshot is a real one of
// fixtures/python/wrong_tag.py (np=2, Open MPI 4.1.4, Debian's python3 3.11), taken by
// `mqd snapshot --attach PID --json`.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type JobSnapshot, validateSnapshot, type WatchSample, watchVerdict } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { chatText, webhookBody } from '../src/watch/notify.js';

const SNAPSHOT = fileURLToPath(new URL('../../../fixtures/python/wrong_tag.snapshot.json', import.meta.url));
const SCRIPT = fileURLToPath(new URL('../../../fixtures/python/wrong_tag.py', import.meta.url));

function snapshot(): JobSnapshot {
  const s: unknown = JSON.parse(readFileSync(SNAPSHOT, 'utf8'));
  const v = validateSnapshot(s);
  if (!v.ok) throw new Error(v.error.message);
  return s as JobSnapshot;
}

/** The 1-based line of the script's `# MQD_LINE recv` marker. */
function recvLine(): number {
  return (
    readFileSync(SCRIPT, 'utf8')
      .split('\n')
      .findIndex((l) => l.endsWith('# MQD_LINE recv')) + 1
  );
}

describe('the hang watch on an mpi4py job', () => {
  it("the webhook's text names the mpi4py call and the Python line, no interpreter frame", () => {
    const snap = snapshot();
    expect(snap.ranks.every((r) => (r.threads?.find((t) => t.main)?.python?.frames.length ?? 0) > 0)).toBe(
      true,
    );
    const samples: WatchSample[] = [0, 1, 2].map((i) => ({
      at: 1_800_000_000_000 + i * 30_000,
      clockTicksPerSecond: 100,
      snapshot: snap,
      counters: snap.ranks.map((r) => ({ rank: r.rank, cpuTicks: 0, switches: 0, state: 'S' })),
    }));
    const v = watchVerdict(samples, { hungAfterSamples: 3 });
    expect(v.state).toBe('hung');
    const line = recvLine();
    expect(line).toBeGreaterThan(0);
    expect(v.diagnosis).toBe(
      `Deadlock: ranks 0-1 wait in MPI_Recv (comm.recv) for a message from the next rank, tag 99, on MPI_COMM_WORLD, at wrong_tag.py:${line} in wait_for_left`,
    );
    const body = webhookBody(
      {
        jobKey: 'vm:4242',
        jobId: null,
        slurmJob: null,
        user: 'alice',
        uid: 1000,
        state: v.state,
        since: '2027-01-15T08:00:00.000Z',
        leastProgressed: v.leastProgressedText,
        diagnosis: v.diagnosis,
        link: 'https://mqd.example/s/abc',
      },
      'python3',
    );
    // `text` as the chat tools read it (dots that would make a link are escaped), `mqd` as it was.
    expect(body.text).toContain(chatText(`MPI_Recv (comm.recv)`));
    expect(body.text).toContain(chatText(`at wrong_tag.py:${line} in wait_for_left`));
    expect(body.mqd.diagnosis).toBe(v.diagnosis);
    expect(body.text).not.toMatch(/_PyEval|libpython|python3\.11/);
  });
});
