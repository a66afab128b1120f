// The hang watch's cores: what an agent's reader does for a `capture` request
// (apps/server agent.ts handleCapture). The same machinery as `mqd capture` (capture-cmd.ts):
// the owner child (capture-owner.ts) finds or creates the directory and writes the manifest as
// the job's owner, root creates the directory only when the owner cannot and only below
// directories no other user can change (createForOwner), and each core is written by a reader
// running as the owner after the start-time and owner checks of a snapshot, the rank stopped
// only while its core is written (Snapshotter.capture).
import { basename } from 'node:path';
import { procCredentials, type Snapshotter } from '@mqd/core';
import { type DiscoveredRank, err, isErrorCode, mqdError, ok, type Result } from '@mqd/model';
import { localHost } from '@mqd/mpir';
import type { CapturedRank, CaptureResult } from '@mqd/server/agent';
import { CaptureOwner, createForOwner } from './capture-owner.js';
import { type CaptureManifest, MANIFEST_FORMAT } from './core-args.js';

/** Writes `ranks`' cores and the manifest into `dir` (absolute) as `ownerUid`; every rank answered. */
export async function captureForWatch(
  snapshotter: Snapshotter,
  ranks: readonly DiscoveredRank[],
  dir: string,
  opts: { readonly host: string; readonly ownerUid: number },
): Promise<Result<CaptureResult>> {
  const { ownerUid } = opts;
  // The owner's group: that of the first rank that is the owner's.
  let ownerGid: number | undefined;
  for (const r of ranks) {
    const c = procCredentials(r.pid);
    if (c && c.uids[0] === ownerUid) {
      ownerGid = c.gids[0];
      break;
    }
  }
  if (ownerGid === undefined) {
    return err(
      mqdError('MQD_E_NO_RANKS', `no rank of this job runs on ${opts.host} as its owner (uid ${ownerUid})`),
    );
  }
  const files = new CaptureOwner(ownerUid, ownerGid);
  try {
    let at = await files.prepare(dir);
    if (at.ok && 'needsRoot' in at.value && process.geteuid?.() === 0) {
      const made = createForOwner(dir, ownerUid, ownerGid);
      if (!made.ok) return made;
      at = await files.prepare(dir);
    }
    if (!at.ok) return at;
    if ('needsRoot' in at.value) {
      return err(mqdError('MQD_E_CAPTURE_DIR', `cannot create ${dir} as uid ${ownerUid}: permission denied`));
    }
    const held = at.value;
    const { captured, unidentified } = await snapshotter.capture(
      ranks.map((r) => ({ pid: r.pid, rank: r.rank, host: opts.host, startTime: r.startTime })),
      dir,
      { ownerUid, allowRoot: ownerUid === 0 },
    );
    const manifest: CaptureManifest = {
      format: MANIFEST_FORMAT,
      capturedAt: new Date().toISOString(),
      host: localHost().short,
      starterPid: null,
      ranks: captured.flatMap((c) =>
        'core' in c
          ? [{ rank: c.rank, pid: c.pid, core: basename(c.core), executable: c.executable, bytes: c.bytes }]
          : [],
      ),
      failed: captured.flatMap((c) => ('error' in c ? [{ rank: c.rank, pid: c.pid, error: c.error }] : [])),
    };
    const written = await files.manifest(dir, held, `${JSON.stringify(manifest, null, 2)}\n`);
    if (!written.ok) return written;
    const out: CapturedRank[] = captured.map((c) =>
      'core' in c
        ? {
            rank: c.rank,
            pid: c.pid,
            core: basename(c.core),
            bytes: c.bytes,
            pausedMicros: c.pausedMicros,
            error: null,
          }
        : { rank: c.rank, pid: c.pid, core: null, bytes: 0, pausedMicros: 0, error: c.error },
    );
    for (const u of unidentified) {
      const r = ranks.find((x) => x.pid === u.pid);
      if (r === undefined || out.some((x) => x.rank === r.rank)) continue;
      out.push({
        rank: r.rank,
        pid: r.pid,
        core: null,
        bytes: 0,
        pausedMicros: 0,
        error: isErrorCode(u.error.code)
          ? { code: u.error.code, message: u.error.message }
          : mqdError('MQD_E_INTERNAL', u.error.message),
      });
    }
    out.sort((a, b) => a.rank - b.rank);
    return ok({ dir, ranks: out });
  } finally {
    files.dispose();
  }
}
