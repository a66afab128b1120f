// `mqd capture (--attach STARTER_PID | --slurm JOBID | --pid PID[:RANK] ...) --out DIR [--json]`
// One core per rank and a manifest: the job's state, to read after it is killed or
// to hand to someone else (`mqd snapshot --cores DIR`). Run as root, nothing of the job's
// reaches root's rights: what goes into DIR is made by processes that are the job's owner
// (capture-owner.ts), the job owner is the starter's for --attach (attach-owner.ts).
import { join } from 'node:path';
import { procCredentials, type SnapshotTarget, Snapshotter } from '@mqd/core';
import { mqdError } from '@mqd/model';
import { localHost, parseSlurmJob, slurmRanks } from '@mqd/mpir';
import { attachAsOwner } from './attach-owner.js';
import { CaptureOwner, captureDir, createForOwner } from './capture-owner.js';
import type { Bundled } from './capture-owner-protocol.js';
import { commandArgs, usageError } from './command-args.js';
import { type CaptureManifest, MANIFEST_FORMAT, SYSROOT_NAME } from './core-args.js';
import { parsePidArg } from './pid-arg.js';
import { CAPTURE_USAGE, type Io } from './usage.js';

const usage = (io: Io, detail: string): number => usageError(io, CAPTURE_USAGE, detail);

export async function captureCommand(argv: string[], io: Io): Promise<number> {
  const values = commandArgs(io, CAPTURE_USAGE, argv, {
    attach: { type: 'string' },
    slurm: { type: 'string' },
    pid: { type: 'string', multiple: true },
    out: { type: 'string' },
    json: { type: 'boolean' },
    bundle: { type: 'boolean' },
  });
  if (typeof values === 'number') return values;
  const pids = values.pid ?? [];
  if ([values.attach !== undefined, values.slurm !== undefined, pids.length > 0].filter(Boolean).length !== 1)
    return usage(io, 'give one of --attach PID, --slurm JOBID or --pid PID...');
  if (values.out === undefined) return usage(io, '--out DIR is required');
  const dir = captureDir(values.out);

  const targets: SnapshotTarget[] = [];
  // The job owner: the starter's (--attach), Slurm's (--slurm), else the first pid's; every
  // rank must be theirs (the Snapshotter refuses others before stopping anything).
  let ownerUid: number | undefined;
  let ownerGid: number | undefined;
  let starterPid: number | null = null;
  if (values.attach !== undefined) {
    const s = parsePidArg(values.attach);
    if ('code' in s) return usage(io, s.message);
    starterPid = s.pid;
    const job = await attachAsOwner(s.pid);
    if (!job.ok) {
      io.err(job.error.message);
      return 1;
    }
    for (const w of job.value.warnings) io.err(`warning: ${w}`);
    targets.push(...job.value.targets);
    ownerUid = job.value.ownerUid;
    ownerGid = job.value.ownerGid;
  } else if (values.slurm !== undefined) {
    const spec = parseSlurmJob(values.slurm);
    if (!spec.ok) return usage(io, spec.error.message);
    const found = slurmRanks(spec.value);
    if (!found.ok) {
      io.err(found.error.message);
      return 1;
    }
    ownerUid = found.value.info.uid;
    for (const r of found.value.job.ranks) targets.push({ pid: r.pid, rank: r.rank });
  } else {
    for (const p of pids) {
      const t = parsePidArg(p);
      if ('code' in t) return usage(io, t.message);
      targets.push(t);
    }
  }
  if (targets.length === 0) {
    io.err(mqdError('MQD_E_NO_RANKS', 'no rank of this job runs on this host').message);
    return 1;
  }
  // The owner's group: the starter's, else that of the first rank that is the owner's.
  for (const t of targets) {
    if (ownerGid !== undefined) break;
    const c = procCredentials(t.pid);
    if (c && (ownerUid === undefined || c.uids[0] === ownerUid)) {
      ownerUid ??= c.uids[0];
      ownerGid = c.gids[0];
    }
  }
  if (ownerUid === undefined || ownerGid === undefined) {
    io.err(
      mqdError(
        'MQD_E_NO_RANKS',
        `no rank of this job runs on this host${ownerUid !== undefined ? ` as its owner (uid ${ownerUid})` : ''}`,
      ).message,
    );
    return 1;
  }

  // Everything in the capture directory is made by the job owner: the directory (unless the
  // owner cannot create it: then root does, below root-only directories, and gives it to them),
  // the cores (the reader), the sysroot and the manifest (the owner child).
  const files = new CaptureOwner(ownerUid, ownerGid);
  const snapshotter = new Snapshotter();
  try {
    let at = await files.prepare(dir);
    if (at.ok && 'needsRoot' in at.value && process.geteuid?.() === 0) {
      const made = createForOwner(dir, ownerUid, ownerGid);
      if (!made.ok) {
        io.err(made.error.message);
        return 1;
      }
      at = await files.prepare(dir);
    }
    if (!at.ok) {
      io.err(at.error.message);
      return 1;
    }
    if ('needsRoot' in at.value) {
      io.err(mqdError('MQD_E_CAPTURE_DIR', `cannot create ${dir}: permission denied`).message);
      return 1;
    }
    const held = at.value;
    const { captured, unidentified } = await snapshotter.capture(targets, dir, {
      ownerUid,
      allowRoot: ownerUid === 0,
    });
    let bundled: Bundled | null = null;
    const done = captured.flatMap((c) => ('core' in c ? [c.pid] : []));
    if (values.bundle && done.length > 0) {
      // The DLL is named in the ranks' memory: resolved by a reader that is their owner, and
      // copied by the owner child, so the name reaches only files the owner can read anyway.
      const dlls: string[] = [];
      const d = await snapshotter.dllOf(done[0] ?? 0, { allowRoot: ownerUid === 0 });
      if (d.ok) dlls.push(d.value);
      else io.err(`warning: the DLL is not bundled: ${d.error.message}`);
      const b = await files.bundle(dir, held, done, dlls);
      if (b.ok) {
        bundled = b.value;
        for (const w of b.value.skipped) io.err(`warning: not bundled: ${w}`);
      } else io.err(`warning: the job's files are not bundled: ${b.error.message}`);
    }
    const manifest: CaptureManifest = {
      format: MANIFEST_FORMAT,
      capturedAt: new Date().toISOString(),
      host: localHost().short,
      starterPid,
      ...(bundled ? { sysroot: SYSROOT_NAME } : {}),
      ranks: captured.flatMap((c) =>
        'core' in c
          ? [{ rank: c.rank, pid: c.pid, core: c.core, executable: c.executable, bytes: c.bytes }]
          : [],
      ),
      failed: [
        ...captured.flatMap((c) => ('error' in c ? [{ rank: c.rank, pid: c.pid, error: c.error }] : [])),
      ],
    };
    const text = JSON.stringify(manifest, null, 2);
    const written = await files.manifest(dir, held, `${text}\n`);
    if (!written.ok) {
      io.err(written.error.message);
      return 1;
    }
    // What was written, from memory: reading DIR/manifest.json back would follow whatever the
    // owner put there since.
    if (values.json) io.out(text);
    else {
      io.out(`captured ${manifest.ranks.length} of ${captured.length} rank(s) into ${dir}`);
      for (const c of captured) {
        if ('core' in c)
          io.out(
            `  rank ${c.rank}  pid ${c.pid}  ${c.core}  ${(c.bytes / 1e6).toFixed(1)} MB  stopped ${(c.pausedMicros / 1000).toFixed(1)} ms`,
          );
        else io.out(`  rank ${c.rank}  pid ${c.pid}  not captured: ${c.error.message}`);
      }
      if (bundled)
        io.out(
          `  with the job's files: ${bundled.files} files, ${(bundled.bytes / 1e6).toFixed(1)} MB in ${join(dir, SYSROOT_NAME)}`,
        );
      io.out(`read it with: mqd snapshot --cores ${dir}`);
    }
    for (const u of unidentified) io.err(`not a rank: pid ${u.pid}: ${u.error.message}`);
    if (manifest.ranks.length === 0) return 1;
    return manifest.failed.length === 0 && unidentified.length === 0 ? 0 : 3;
  } finally {
    files.dispose();
    await snapshotter.dispose();
  }
}
