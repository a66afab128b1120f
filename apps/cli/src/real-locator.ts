// The real JobLocator for agents: @mqd/mpir behind the server's seam. Runs on the node of the
// starter (mpirun / mpiexec): reads its MPIR table, or falls back to the process tree, in a
// child running as the starter's owner (locate-as-owner.ts); local ranks of another uid are
// dropped, and every local rank and the starter are pinned by their start time. Slurm jobs
// are located by job id (locateSlurm); a directory of core files by its manifest or the
// cores' names (locateCores).
import {
  closeSync,
  constants,
  fstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  readSync,
} from 'node:fs';
import {
  fileKind,
  openDirNoFollow,
  openFailure,
  procCredentials,
  procStartTime,
  rankFromCoreName,
  readCoreInfoFd,
} from '@mqd/core';
import { CLIP_MARK, clipText, err, type MqdError, mqdError, ok, type Result } from '@mqd/model';
import { type LocalHost, localHost, parseSlurmJob, slurmJobInfo, slurmRanks } from '@mqd/mpir';
import {
  type JobLocator,
  type LocatedJob,
  MAX_COMMAND_CHARS,
  MAX_SEEN_JOBS,
  otherOwner,
  type SeenStarter,
} from '@mqd/server/agent';
import { coresFromDir } from './core-args.js';
import { locateAsOwner } from './locate-as-owner.js';

/** Process names of MPI starters an agent reports before anyone attaches. */
const STARTERS = new Set(['mpirun', 'mpiexec', 'orterun', 'mpiexec.hydra', 'prterun', 'srun']);

export class MpirJobLocator implements JobLocator {
  private readonly here: LocalHost;

  /** `agentHost`: the name this node's agent registered with; the starter's own names for this machine map to it. */
  constructor(
    agentHost?: string,
    private readonly opts: { log?: (line: string) => void } = {},
  ) {
    const machine = localHost();
    this.here = agentHost ? { short: agentHost, aliases: new Set([agentHost, ...machine.aliases]) } : machine;
  }

  async locate(starterPid: number): Promise<Result<LocatedJob, MqdError>> {
    const owner = procCredentials(starterPid)?.uids[0];
    const foreign = owner === undefined ? null : refusedByUserAgent(owner, `starter ${starterPid}`);
    if (foreign) return err(foreign);
    const r = await locateAsOwner(starterPid, this.here);
    if (!r.ok) return r;
    const { job: j, ranks, uid, starterStartTime, warnings } = r.value;
    for (const w of warnings) this.opts.log?.(`starter ${starterPid}: ${w}`);
    return ok({
      ranks: ranks.map((x) => ({
        rank: x.rank,
        pid: x.pid,
        host: x.host,
        ...(x.startTime !== undefined ? { startTime: x.startTime } : {}),
      })),
      method: j.method,
      // The starter's real uid as this side read it from /proc, not what the child said.
      uid,
      command: j.starter?.command ?? '',
      starterStartTime,
    });
  }

  /**
   * A Slurm job's ranks on this node (`scontrol`, run here as the agent). The job is pinned by
   * its first process here (the batch script, else the first task) and that process's start
   * time, as a starter pid would pin it; the owner is the job's Slurm user.
   */
  async locateSlurm(job: string): Promise<Result<LocatedJob, MqdError>> {
    const spec = parseSlurmJob(job);
    if (!spec.ok) return spec;
    if (agentUid() !== 0) {
      // A user's agent cannot even list another user's ranks (their /proc maps are closed to
      // it): say whose job it is instead of "no MPI process".
      const info = slurmJobInfo(spec.value.jobId);
      if (!info.ok) return info;
      const foreign = refusedByUserAgent(info.value.uid, `Slurm job ${job}`);
      if (foreign) return err(foreign);
    }
    const found = slurmRanks(spec.value, { here: this.here });
    if (!found.ok) return found;
    for (const w of found.value.job.warnings) this.opts.log?.(`Slurm job ${job}: ${w}`);
    const rows = found.value.processes;
    const anchor = rows.find((r) => r.step === 'batch') ?? rows[0];
    const anchorStart = anchor === undefined ? null : procStartTime(anchor.pid);
    if (anchor === undefined || anchorStart === null) {
      return err(mqdError('MQD_E_NO_RANKS', `Slurm job ${job} has no process left on ${this.here.short}`));
    }
    const i = found.value.info;
    return ok({
      ranks: found.value.job.ranks.map((x) => {
        const startTime = procStartTime(x.pid);
        return { rank: x.rank, pid: x.pid, host: x.host, ...(startTime !== null ? { startTime } : {}) };
      }),
      method: 'slurm',
      uid: i.uid,
      command: `Slurm job ${i.jobId} (${i.name}) ${i.command}`.trim(),
      starterStartTime: anchorStart,
      starterPid: anchor.pid,
      // The aggregator locates the job on these nodes too (their agents read their ranks).
      ...(found.value.otherNodes.length > 0 ? { otherNodes: found.value.otherNodes } : {}),
    });
  }

  /**
   * The cores of `dir` (a real path the agent has checked against its allowed roots): ranks
   * from the capture manifest or the files' names (rank-N), each core's pid and command from
   * its notes (headers only: memory is read later, by a reader running as the files' owner).
   * Root reads these headers, so nothing here follows a path twice: the directory is
   * held open (O_DIRECTORY|O_NOFOLLOW) and must still be at `dir`; the listing, the manifest and
   * every core are reached through that descriptor; each core is opened once
   * (O_NOFOLLOW|O_NONBLOCK: a symlink or FIFO put in its place is refused, never followed or
   * waited on), checked on that descriptor (a regular file, all cores of one uid) and parsed
   * through it. The uid returned is those cores' owner, which the agent compares with what the
   * paths say after this (agent.ts): a core swapped in and out meanwhile fails there. A core
   * whose notes cannot be parsed keeps pid 1 and gets its coded error when the snapshot reads it.
   */
  async locateCores(dir: string): Promise<Result<LocatedJob, MqdError>> {
    let held: ReturnType<typeof openDirNoFollow>;
    try {
      held = openDirNoFollow(dir);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      const why =
        code === 'ELOOP' || code === 'ENOTDIR' ? 'is a symbolic link or not a directory' : openFailure(e);
      return err(mqdError('MQD_E_CORE_DIR_FORBIDDEN', `core directory ${dir} ${why}`));
    }
    try {
      return this.coresIn(dir, held.fd, held.st.mtimeMs);
    } finally {
      closeSync(held.fd);
    }
  }

  private coresIn(dir: string, dirFd: number, mtimeMs: number): Result<LocatedJob, MqdError> {
    const at = `/proc/self/fd/${dirFd}`;
    let now = '';
    try {
      now = readlinkSync(at);
    } catch {
      now = '';
    }
    // The descriptor's directory is the one the agent checked, not one swapped in above it.
    if (now !== dir) {
      return err(mqdError('MQD_E_CORE_DIR_FORBIDDEN', `core directory ${dir} moved while it was opened`));
    }
    const shown = (text: string) => text.replaceAll(at, dir);
    const found = coresFromDir(at);
    if ('code' in found) {
      return err(
        found.code === 'MQD_E_USAGE'
          ? mqdError(
              'MQD_E_CORE_NO_RANK',
              `${dir} holds no core file (core, core.*, *.core) and no manifest.json`,
            )
          : { ...found, message: shown(found.message) },
      );
    }
    const ranks: { rank: number; pid: number; host: string; core: string }[] = [];
    let command = '';
    let uid: number | null = null;
    for (const c of found) {
      const path = shown(c.path);
      let fd: number;
      try {
        // c.path is `${at}/NAME`: NAME resolved in the held directory, never through a link.
        fd = openSync(c.path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      } catch (e) {
        return err(mqdError('MQD_E_CORE_INVALID', `${path} ${openFailure(e)}`));
      }
      try {
        const st = fstatSync(fd);
        if (!st.isFile())
          return err(mqdError('MQD_E_CORE_INVALID', `${path} is ${fileKind(st)}, not a regular file`));
        const mixed = otherOwner(uid, st.uid);
        if (mixed) return err(mixed);
        uid = st.uid;
        const rank = c.rank ?? rankFromCoreName(path);
        if (rank === null)
          return err(mqdError('MQD_E_CORE_NO_RANK', `${path}: no rank in the manifest or the name`));
        if (ranks.some((r) => r.rank === rank)) {
          return err(mqdError('MQD_E_BAD_INPUT', `rank ${rank} has two cores in ${dir} (${path})`));
        }
        const info = readCoreInfoFd(fd, path);
        if (info.ok && command === '') command = info.value.psargs || info.value.fname;
        ranks.push({
          rank,
          pid: info.ok && info.value.pid > 0 ? info.value.pid : 1,
          host: this.here.short,
          core: path,
        });
      } finally {
        closeSync(fd);
      }
    }
    ranks.sort((a, b) => a.rank - b.rank);
    return ok({
      ranks,
      method: 'cores',
      // The owner of the files read above (as fstat saw them), not of whatever the paths name later.
      uid: uid ?? -1,
      command: `${ranks.length} core files${command === '' ? '' : ` of ${command}`}`,
      // The directory's modification time stands for a starter's start time (a new capture
      // into the same directory changes it).
      starterStartTime: String(Math.trunc(mtimeMs)),
      starterPid: ranks[0]?.pid ?? 1,
      coresDir: dir,
    });
  }

  /**
   * The node's MPI starters, at most MAX_SEEN_JOBS. Any local user can name a process mpirun:
   * its command line (up to ARG_MAX, 2 MB) is read only up to what the status carries and cut
   * there with a visible "…" (clipText).
   */
  async list(): Promise<readonly SeenStarter[]> {
    const out: SeenStarter[] = [];
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      if (out.length >= MAX_SEEN_JOBS) break;
      try {
        const comm = readFileSync(`/proc/${d}/comm`, 'utf8').trim();
        if (!STARTERS.has(comm)) continue;
        const status = readFileSync(`/proc/${d}/status`, 'utf8');
        const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1);
        const command = commandLine(Number(d));
        const startTime = procStartTime(Number(d));
        out.push({ starterPid: Number(d), uid, command, ...(startTime !== null ? { startTime } : {}) });
      } catch {
        // the process ended while we looked: not a starter any more
      }
    }
    return out;
  }
}

/**
 * A process's command line, arguments joined by spaces, at most MAX_COMMAND_CHARS: only the
 * first bytes of /proc/PID/cmdline are read (enough for that many characters of UTF-8).
 */
function commandLine(pid: number): string {
  const fd = openSync(`/proc/${pid}/cmdline`, 'r');
  try {
    const buf = Buffer.alloc(MAX_COMMAND_CHARS * 4 + 4);
    let n = 0;
    for (let got = -1; got !== 0 && n < buf.length; n += got)
      got = readSync(fd, buf, n, buf.length - n, null);
    const text = buf.subarray(0, n).toString('utf8').split('\0').filter(Boolean).join(' ');
    // The buffer filled up: the command goes on, so it shows as cut even where what was read fits.
    return clipText(n === buf.length ? `${text}${CLIP_MARK}` : text, MAX_COMMAND_CHARS);
  } finally {
    closeSync(fd);
  }
}

/** The agent's effective uid: 0 for a site agent, the user's for one started in a user's job. */
export function agentUid(): number {
  return process.geteuid?.() ?? 0;
}

/**
 * An agent that is not root (a user's own, started inside their job with `srun --overlap`)
 * reads only its own uid's processes; null when `uid` is that uid (or the agent is root).
 */
export function refusedByUserAgent(uid: number, what: string): MqdError | null {
  const me = agentUid();
  if (me === 0 || uid === me) return null;
  return mqdError(
    'MQD_E_FOREIGN_PROCESS',
    `${what} belongs to uid ${uid}, but this agent runs as uid ${me} (a user's own agent) and reads only that user's processes; nothing was stopped or read: attach it where a site agent runs as root, or let its owner start one`,
  );
}
