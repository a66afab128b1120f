// `mqd snapshot (--attach STARTER_PID | --slurm JOBID[.STEP] | --pid PID[:RANK] ... | --core CORE ... | --cores DIR) [--dll PATH] [--json] [--all] [--explain] [--stacks [--all-threads]] [--eval EXPR [--frame FUNC]]... [--progress EXPR [--frame FUNC]]`
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type CoreSnapshotTarget, type SnapshotTarget, Snapshotter } from '@mqd/core';
import {
  buildStackTree,
  explainSnapshot,
  mqdError,
  progressCounter,
  progressCounterPosition,
  summarizeValues,
  valueGroupsText,
} from '@mqd/model';
import { parseSlurmJob, slurmRanks } from '@mqd/mpir';
import { attachAsOwner } from './attach-owner.js';
import { coresFromDir, coresFromTokens, SYSROOT_NAME } from './core-args.js';
import { evalsFromTokens } from './eval-args.js';
import { parsePidArg } from './pid-arg.js';
import { snapshotText } from './snapshot-text.js';
import { stackKeyFor } from './stacks-text.js';
import { type Io, SNAPSHOT_USAGE } from './usage.js';

export async function snapshotCommand(argv: string[], io: Io): Promise<number> {
  let values: {
    pid?: string[];
    attach?: string;
    slurm?: string;
    dll?: string;
    json?: boolean;
    all?: boolean;
    explain?: boolean;
    stacks?: boolean;
    'all-threads'?: boolean;
    help?: boolean;
    core?: string[];
    cores?: string;
    sysroot?: string;
    eval?: string[];
    progress?: string[];
    frame?: string[];
  };
  let tokens: Parameters<typeof coresFromTokens>[0] = [];
  try {
    ({ values, tokens = [] } = parseArgs({
      args: argv,
      options: {
        pid: { type: 'string', multiple: true },
        attach: { type: 'string' },
        slurm: { type: 'string' },
        dll: { type: 'string' },
        json: { type: 'boolean' },
        all: { type: 'boolean' },
        explain: { type: 'boolean' },
        stacks: { type: 'boolean' },
        'all-threads': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        core: { type: 'string', multiple: true },
        rank: { type: 'string', multiple: true },
        exe: { type: 'string', multiple: true },
        cores: { type: 'string' },
        sysroot: { type: 'string' },
        eval: { type: 'string', multiple: true },
        progress: { type: 'string', multiple: true },
        frame: { type: 'string', multiple: true },
      },
      strict: true,
      tokens: true,
    }));
  } catch (e) {
    io.err(`${mqdError('MQD_E_USAGE', (e as Error).message).message}\n${SNAPSHOT_USAGE}`);
    return 2;
  }
  if (values.help) {
    io.out(SNAPSHOT_USAGE);
    return 0;
  }
  const evals = evalsFromTokens(tokens);
  if ('code' in evals) {
    io.err(`${evals.message}\n${SNAPSHOT_USAGE}`);
    return 2;
  }
  if (evals.length > 0 && (values.core !== undefined || values.cores !== undefined)) {
    io.err(
      `${mqdError('MQD_E_USAGE', '--eval and --progress read live ranks (--attach, --slurm, --pid), not cores').message}\n${SNAPSHOT_USAGE}`,
    );
    return 2;
  }
  const targets: SnapshotTarget[] = [];
  for (const p of values.pid ?? []) {
    const t = parsePidArg(p);
    if ('code' in t) {
      io.err(t.message);
      return 2;
    }
    targets.push(t);
  }
  let cores: CoreSnapshotTarget[] = [];
  if (values.core !== undefined || values.cores !== undefined) {
    const named =
      values.cores !== undefined ? coresFromDir(values.cores, lastExe(tokens)) : coresFromTokens(tokens);
    if ('code' in named) {
      io.err(`${named.message}\n${SNAPSHOT_USAGE}`);
      return 2;
    }
    cores = named;
  }
  const sources = [
    targets.length > 0,
    values.attach !== undefined,
    values.slurm !== undefined,
    values.core !== undefined,
    values.cores !== undefined,
  ];
  if (sources.filter(Boolean).length !== 1) {
    io.err(
      `${mqdError('MQD_E_USAGE', 'give one of --attach STARTER_PID, --slurm JOBID, --core CORE, --cores DIR or at least one --pid').message}\n${SNAPSHOT_USAGE}`,
    );
    return 2;
  }
  // A Slurm job: its ranks on this node, read for the job's owner as Slurm names it.
  let ownerUid: number | undefined;
  if (values.slurm !== undefined) {
    const spec = parseSlurmJob(values.slurm);
    if (!spec.ok) {
      io.err(`${spec.error.message}\n${SNAPSHOT_USAGE}`);
      return 2;
    }
    const found = slurmRanks(spec.value);
    if (!found.ok) {
      io.err(found.error.message);
      return 1;
    }
    for (const w of found.value.job.warnings) io.err(`warning: ${w}`);
    if (found.value.job.ranks.length === 0) {
      io.err(mqdError('MQD_E_NO_RANKS', `Slurm job ${spec.value.jobId} has no rank on this node`).message);
      return 1;
    }
    if (!values.json) {
      const i = found.value.info;
      io.out(`Slurm job ${i.jobId} (${i.name}) of ${i.user} (uid ${i.uid}) on ${i.nodes.join(',')}`);
    }
    ownerUid = found.value.info.uid;
    for (const r of found.value.job.ranks) targets.push({ pid: r.pid, rank: r.rank });
  }
  const starter = values.attach !== undefined ? parsePidArg(values.attach) : null;
  if (starter && 'code' in starter) {
    io.err(starter.message);
    return 2;
  }
  const snapshotter = new Snapshotter();
  const snapOpts = {
    ...(values.dll !== undefined ? { dll: values.dll } : {}),
    // The text without --stacks or --explain shows no thread: the ranks are not unwound (a cold
    // unwind indexes every mapped module of each rank).
    ...(values.json || values.stacks || values.explain || evals.length > 0 ? {} : { stacks: false }),
    ...(evals.length > 0 ? { evals } : {}),
    // Root's own job may be read only when Slurm says it is root's (the agent's rule too).
    ...(ownerUid !== undefined ? { ownerUid, allowRoot: ownerUid === 0 } : {}),
  };
  try {
    let snapshot: Awaited<ReturnType<Snapshotter['snapshot']>>['snapshot'];
    if (cores.length > 0) {
      // A capture made with --bundle carries the job's files: used unless --sysroot says otherwise.
      const bundled = values.cores !== undefined ? join(values.cores, SYSROOT_NAME) : null;
      const sysroot = values.sysroot ?? (bundled !== null && existsSync(bundled) ? bundled : undefined);
      const read = await snapshotter.snapshotCores(cores, {
        ...(values.dll !== undefined ? { dll: values.dll } : {}),
        ...(sysroot !== undefined ? { sysroot } : {}),
      });
      snapshot = read.snapshot;
    } else if (starter) {
      // The starter's owner is the job's (as on the server): a rank of another uid or root's
      // that a user's starter lists is refused with its code, never stopped (attach-owner.ts).
      const attached = await attachAsOwner(starter.pid);
      if (!attached.ok) {
        io.err(attached.error.message);
        return 1;
      }
      for (const w of attached.value.warnings) io.err(`warning: ${w}`);
      if (!values.json) io.out(`ranks found through ${attached.value.job.method} of starter ${starter.pid}`);
      const { ownerUid: owner } = attached.value;
      snapshot = (
        await snapshotter.snapshot(attached.value.targets, {
          ...snapOpts,
          ownerUid: owner,
          allowRoot: owner === 0,
        })
      ).snapshot;
    } else {
      snapshot = (await snapshotter.snapshot(targets, snapOpts)).snapshot;
    }
    const explanation = values.explain ? explainSnapshot(snapshot) : null;
    const stackTree = values.stacks
      ? buildStackTree(snapshot, {
          threads: values['all-threads'] ? 'all' : 'main',
          by: stackKeyFor(snapshot),
        })
      : null;
    if (values.json) {
      // The bare snapshot stays the default shape; extras wrap it beside `snapshot`.
      const valueSummaries = evals.length > 0 ? summarizeValues(snapshot.ranks) : null;
      const counter = evals.length > 0 ? progressCounter(snapshot.ranks) : null;
      const extras = {
        ...(stackTree ? { stackTree } : {}),
        ...(explanation ? { explanation } : {}),
        ...(valueSummaries ? { values: valueSummaries } : {}),
        ...(counter ? { progressCounter: counter } : {}),
      };
      const wrapped = stackTree || explanation || valueSummaries;
      io.out(JSON.stringify(wrapped ? { snapshot, ...extras } : snapshot, null, 2));
    } else {
      io.out(snapshotText(snapshot, { all: values.all ?? false, stackTree, explanation }));
      if (evals.length > 0) io.out(valuesText(snapshot.ranks));
    }
    const okRanks = snapshot.ranks.filter((r) => r.state.kind === 'ok').length;
    const unidentified = snapshot.unidentified ?? [];
    if (okRanks === 0) {
      if (!values.json) {
        for (const r of snapshot.ranks) if (r.state.kind !== 'ok') io.err(r.state.message);
        for (const u of unidentified) io.err(u.error.message);
      }
      return 1;
    }
    return okRanks === snapshot.ranks.length && unidentified.length === 0 ? 0 : 3;
  } finally {
    await snapshotter.dispose();
  }
}

/** Each expression's value per rank, grouped: `counter (in main): ranks 0-2,4-7: 42; rank 3: 41`. */
function valuesText(ranks: Parameters<typeof summarizeValues>[0]): string {
  const lines = ['values:'];
  const marked = progressCounterPosition(ranks);
  summarizeValues(ranks).forEach((s, i) => {
    const notes = [
      ...(s.frame !== null ? [`in ${s.frame}`] : []),
      ...(i === marked ? ['progress counter'] : []),
    ];
    lines.push(`  ${s.expr}${notes.length > 0 ? ` (${notes.join(', ')})` : ''}: ${valueGroupsText(s)}`);
  });
  // The progress counter's verdict, as the explanation words it (nothing when every rank agrees).
  const counter = progressCounter(ranks);
  if (counter !== null) lines.push(`  ${counter.line.text}`);
  return lines.join('\n');
}

/** `--exe EXE` with `--cores DIR`: the last one given. */
function lastExe(tokens: Parameters<typeof coresFromTokens>[0]): string | undefined {
  let exe: string | undefined;
  for (const t of tokens) if (t.kind === 'option' && t.name === 'exe' && t.value !== undefined) exe = t.value;
  return exe;
}
