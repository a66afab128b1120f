// Which core files a `mqd snapshot` reads: `--core CORE [--rank N] [--exe EXE]` (repeatable;
// --rank and --exe after a --core belong to it, an --exe before any --core to all of them) and
// `--cores DIR` (a capture's manifest.json when there is one, else every core-looking file).
import { readdirSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { type CoreSnapshotTarget, readRegularFile } from '@mqd/core';
import { type MqdError, mqdError } from '@mqd/model';

/** The manifest `mqd capture` writes next to the cores (capture-cmd.ts builds it, capture-owner.ts writes it as the owner). */
export const MANIFEST_NAME = 'manifest.json';
export const MANIFEST_FORMAT = 'mqd-capture/1';
/** Where `mqd capture --bundle` copies the job's files, inside the capture directory. */
export const SYSROOT_NAME = 'sysroot';

export interface CaptureManifest {
  readonly format: typeof MANIFEST_FORMAT;
  readonly capturedAt: string;
  readonly host: string;
  readonly starterPid: number | null;
  /** `--bundle`: the job's files under this directory of the capture (SYSROOT_NAME). */
  readonly sysroot?: string;
  readonly ranks: readonly {
    readonly rank: number;
    readonly pid: number;
    /** File name inside the capture directory. */
    readonly core: string;
    readonly executable: string;
    readonly bytes: number;
  }[];
  /** Ranks that could not be captured, with their coded error. */
  readonly failed: readonly { readonly rank: number; readonly pid: number; readonly error: MqdError }[];
}

interface Token {
  readonly kind: string;
  readonly name?: string;
  readonly value?: string | undefined;
}

/** The cores named by `--core`, `--rank`, `--exe` in the order given. */
export function coresFromTokens(tokens: readonly Token[]): CoreSnapshotTarget[] | MqdError {
  const out: { path: string; rank?: number; exe?: string }[] = [];
  let globalExe: string | undefined;
  for (const t of tokens) {
    if (t.kind !== 'option' || t.value === undefined) continue;
    const last = out.at(-1);
    if (t.name === 'core') out.push({ path: t.value });
    else if (t.name === 'rank') {
      if (!last) return mqdError('MQD_E_USAGE', '--rank N follows the --core CORE it numbers');
      if (!/^\d+$/.test(t.value))
        return mqdError('MQD_E_USAGE', `--rank takes a rank number, got '${t.value}'`);
      last.rank = Number(t.value);
    } else if (t.name === 'exe') {
      if (last) last.exe = t.value;
      else globalExe = t.value;
    }
  }
  return out.map((c) => ({
    ...c,
    ...(c.exe === undefined && globalExe !== undefined ? { exe: globalExe } : {}),
  }));
}

/** The cores of a directory: from its capture manifest, else every file named like a core. */
export function coresFromDir(dir: string, exe?: string): CoreSnapshotTarget[] | MqdError {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (e) {
    return mqdError('MQD_E_USAGE', `--cores ${dir}: ${(e as Error).message}`);
  }
  const withExe = (c: CoreSnapshotTarget): CoreSnapshotTarget => (exe !== undefined ? { ...c, exe } : c);
  if (names.includes(MANIFEST_NAME)) {
    const m = readManifest(join(dir, MANIFEST_NAME));
    if ('code' in m) return m;
    return m.ranks.map((r) => withExe({ path: join(dir, r.core), rank: r.rank, host: m.host }));
  }
  const cores = names
    .filter((n) => /(^core\b|\.core$|^core\.)/.test(n))
    .map((n) => join(dir, n))
    .filter((p) => {
      try {
        return statSync(p).isFile();
      } catch {
        return false;
      }
    })
    .sort();
  if (cores.length === 0) {
    return mqdError(
      'MQD_E_USAGE',
      `--cores ${dir}: no core files (core, core.*, *.core) and no ${MANIFEST_NAME}`,
    );
  }
  return cores.map((path) => withExe({ path }));
}

/** The largest manifest read: one rank is ~150 bytes, so a million-rank job fits. */
export const MANIFEST_MAX_BYTES = 1 << 20;

/**
 * A capture manifest, checked field by field (it is a file a user may have edited or planted).
 * Root reads it (the agent opening a core directory, `mqd snapshot --cores` run as root), so
 * it is opened without following a link and without blocking on a FIFO, must be a regular
 * file of at most MANIFEST_MAX_BYTES, and no error quotes its bytes (JSON.parse's message
 * would: a link to /etc/shadow came back in the error text).
 */
export function readManifest(path: string): CaptureManifest | MqdError {
  const bad = (what: string) => mqdError('MQD_E_CORE_MANIFEST', `${path}: ${what}`);
  const bytes = readRegularFile(path, MANIFEST_MAX_BYTES);
  if (!bytes.ok) return bad(bytes.why);
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.value.toString('utf8'));
  } catch {
    return bad('is not valid JSON');
  }
  if (typeof raw !== 'object' || raw === null) return bad('is not a JSON object');
  const m = raw as Record<string, unknown>;
  if (m['format'] !== MANIFEST_FORMAT) return bad(`format is not ${MANIFEST_FORMAT}`);
  if (!Array.isArray(m['ranks'])) return bad('ranks is not a list');
  for (const [i, r] of (m['ranks'] as unknown[]).entries()) {
    const x = r as Record<string, unknown>;
    if (typeof x !== 'object' || x === null) return bad(`ranks[${i}] is not an object`);
    if (!Number.isInteger(x['rank']) || (x['rank'] as number) < 0)
      return bad(`ranks[${i}] has no rank number`);
    const core = x['core'];
    // Only a file of the capture's own directory: the manifest must not point elsewhere.
    if (
      typeof core !== 'string' ||
      core === '' ||
      isAbsolute(core) ||
      core.includes('/') ||
      core.startsWith('.')
    )
      return bad(`ranks[${i}]: core must be a file name in the capture directory`);
  }
  if (typeof m['host'] !== 'string') return bad('host is not a string');
  return raw as CaptureManifest;
}
