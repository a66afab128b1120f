// `mqd capture (--attach STARTER_PID | --slurm JOBID | --pid PID[:RANK] ...) --out DIR [--json]`
// One core per rank and a manifest (issue 17): the job's state, to read after it is killed or
// to hand to someone else (`mqd snapshot --cores DIR`).
import {
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { type Captured, fileMappings, procCredentials, type SnapshotTarget, Snapshotter } from '@mqd/core';
import { mqdError } from '@mqd/model';
import { attachStarter, localHost, localTargets, parseSlurmJob, slurmRanks } from '@mqd/mpir';
import { type CaptureManifest, MANIFEST_FORMAT, MANIFEST_NAME, SYSROOT_NAME } from './core-args.js';
import { parsePidArg } from './pid-arg.js';
import { CAPTURE_USAGE, type Io } from './usage.js';

function usage(io: Io, detail: string): number {
  io.err(`${mqdError('MQD_E_USAGE', detail).message}\n${CAPTURE_USAGE}`);
  return 2;
}

export async function captureCommand(argv: string[], io: Io): Promise<number> {
  let values: {
    attach?: string;
    slurm?: string;
    pid?: string[];
    out?: string;
    json?: boolean;
    bundle?: boolean;
    help?: boolean;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        attach: { type: 'string' },
        slurm: { type: 'string' },
        pid: { type: 'string', multiple: true },
        out: { type: 'string' },
        json: { type: 'boolean' },
        bundle: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (e) {
    return usage(io, (e as Error).message);
  }
  if (values.help) {
    io.out(CAPTURE_USAGE);
    return 0;
  }
  const pids = values.pid ?? [];
  if ([values.attach !== undefined, values.slurm !== undefined, pids.length > 0].filter(Boolean).length !== 1)
    return usage(io, 'give one of --attach PID, --slurm JOBID or --pid PID...');
  if (values.out === undefined) return usage(io, '--out DIR is required');
  const dir = values.out;
  if (existsSync(join(dir, MANIFEST_NAME)))
    return usage(io, `${dir} already holds a capture (${MANIFEST_NAME})`);

  const targets: SnapshotTarget[] = [];
  let ownerUid: number | undefined;
  let starterPid: number | null = null;
  if (values.attach !== undefined) {
    const s = parsePidArg(values.attach);
    if ('code' in s) return usage(io, s.message);
    starterPid = s.pid;
    const job = attachStarter(s.pid);
    if (!job.ok) {
      io.err(job.error.message);
      return 1;
    }
    for (const w of job.value.warnings) io.err(`warning: ${w}`);
    for (const r of localTargets(job.value)) targets.push({ pid: r.pid, rank: r.rank, host: r.host });
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
  // The cores are written by a reader running as the ranks' owner: the directory is theirs.
  const owner = ownerUid ?? procCredentials(targets[0]?.pid ?? 0)?.uids[0];
  const ownerGid = procCredentials(targets[0]?.pid ?? 0)?.gids[0];
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (process.geteuid?.() === 0 && owner !== undefined && ownerGid !== undefined)
      chownSync(dir, owner, ownerGid);
  } catch (e) {
    io.err(mqdError('MQD_E_CAPTURE', `cannot create ${dir}: ${(e as Error).message}`).message);
    return 1;
  }
  const snapshotter = new Snapshotter();
  let captured: Captured[];
  let unidentified: Awaited<ReturnType<Snapshotter['capture']>>['unidentified'];
  let bundled: { files: number; bytes: number } | null = null;
  try {
    ({ captured, unidentified } = await snapshotter.capture(targets, dir, {
      ...(ownerUid !== undefined ? { ownerUid, allowRoot: ownerUid === 0 } : {}),
    }));
    if (values.bundle) {
      const pids = captured.flatMap((c) => ('core' in c ? [c.pid] : []));
      const dlls: string[] = [];
      for (const pid of pids.slice(0, 1)) {
        const d = await snapshotter.dllOf(pid, ownerUid !== undefined ? { allowRoot: ownerUid === 0 } : {});
        if (!d.ok) io.err(`warning: the DLL is not bundled: ${d.error.message}`);
        if (d.ok) dlls.push(d.value);
      }
      bundled = bundleFiles(pids, dlls, join(dir, SYSROOT_NAME), owner, ownerGid, io);
    }
  } finally {
    await snapshotter.dispose();
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
  const path = join(dir, MANIFEST_NAME);
  writeFileSync(path, `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
  if (process.geteuid?.() === 0 && owner !== undefined && ownerGid !== undefined)
    chownSync(path, owner, ownerGid);
  if (values.json) io.out(readFileSync(path, 'utf8').trimEnd());
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
}

/**
 * `--bundle`: the files the ranks map (executable, libraries), the MPI library's DLL and an
 * OpenMP runtime's libompd.so, copied
 * under DIR/sysroot at their own paths, so the capture reads anywhere (`--cores DIR` uses them).
 */
function bundleFiles(
  pids: readonly number[],
  dlls: readonly string[],
  root: string,
  owner: number | undefined,
  gid: number | undefined,
  io: Io,
): { files: number; bytes: number } {
  const paths = new Set<string>(dlls);
  for (const pid of pids) {
    let maps = '';
    try {
      maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
    } catch {
      continue;
    }
    for (const m of fileMappings(maps)) if (!m.deleted && !m.path.startsWith('/dev/')) paths.add(m.path);
  }
  // No rank maps the OpenMP runtime's OMPD library; LLVM's runtime names the libompd.so beside
  // itself in ompd_dll_locations, so that one goes in too (a core's OpenMP threads then read
  // on another machine through the sysroot).
  for (const p of [...paths]) {
    if (!/^lib(i?omp)[^/]*\.so/.test(basename(p))) continue;
    const ompd = join(dirname(p), 'libompd.so');
    if (existsSync(ompd)) paths.add(ompd);
  }
  let files = 0;
  let bytes = 0;
  const root0 = process.geteuid?.() === 0 && owner !== undefined && gid !== undefined;
  for (const p of paths) {
    const to = join(root, p);
    try {
      mkdirSync(dirname(to), { recursive: true, mode: 0o755 });
      copyFileSync(p, to);
      files++;
      bytes += statSync(to).size;
    } catch (e) {
      io.err(`warning: ${p} not bundled: ${(e as Error).message}`);
    }
  }
  if (root0) chownRecursive(root, owner, gid);
  return { files, bytes };
}

/** Root made the bundle: every directory and file in it becomes the job owner's. */
function chownRecursive(dir: string, uid: number, gid: number): void {
  chownSync(dir, uid, gid);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) chownRecursive(p, uid, gid);
    else chownSync(p, uid, gid);
  }
}
