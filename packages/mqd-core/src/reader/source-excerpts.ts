// Source excerpts: a few lines around the user's frame of each thread, read by
// the reader after the rank runs again, so with the job owner's identity (reader/identity.ts)
// and never with more. Only files a frame of the snapshot names are opened (the DWARF line
// tables the unwinder read: model sourcePlaces), each opened O_NONBLOCK (a FIFO's open returns
// at once instead of waiting for a writer) and fstat'ed: anything but a regular file of at most
// MAX_SOURCE_FILE_BYTES is refused before a byte is read. Links are followed: the owner may read
// through any link they can read. A reader that is root (an admin reading a root job) shows
// only files every user may read, so a root job cannot hand an admin a root-only file.
//
// Each file:line is given once per read (one request: a node's ranks); a rank read later at the
// same place carries nothing and the views find the first one (model sourceExcerptFor).

import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import {
  clipText,
  MAX_SOURCE_EXCERPTS_PER_RANK,
  MAX_SOURCE_FILE_BYTES,
  MAX_SOURCE_FILES_PER_READ,
  MAX_SOURCE_LINE_CHARS,
  MAX_SOURCE_REASON_CHARS,
  type RankSnapshot,
  type Result,
  SOURCE_CONTEXT_LINES,
  type SourceExcerpt,
  sourcePlaces,
} from '@mqd/model';
import { fileKind } from '../inferior/files-at.js';

const { O_RDONLY, O_NONBLOCK } = constants;
const S_IROTH = 0o004;

export interface SourceLimits {
  readonly maxFileBytes: number;
  readonly maxFiles: number;
  readonly contextLines: number;
  readonly maxLineChars: number;
  readonly maxExcerptsPerRank: number;
}

export const SOURCE_LIMITS: SourceLimits = {
  maxFileBytes: MAX_SOURCE_FILE_BYTES,
  maxFiles: MAX_SOURCE_FILES_PER_READ,
  contextLines: SOURCE_CONTEXT_LINES,
  maxLineChars: MAX_SOURCE_LINE_CHARS,
  maxExcerptsPerRank: MAX_SOURCE_EXCERPTS_PER_RANK,
};

const fail = (why: string): Result<never, string> => ({ ok: false, error: why });

/** Why opening or reading failed, in the words an excerpt shows; never the file's bytes. */
function ioFailure(e: unknown, uid: number): string {
  const code = (e as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT':
      return 'does not exist on this host';
    case 'EACCES':
    case 'EPERM':
      return `is not readable by uid ${uid}`;
    case 'ENOTDIR':
      return 'has a path component that is not a directory';
    case 'ELOOP':
      return 'has too many levels of symbolic links';
    case 'EISDIR':
      return 'is a directory, not a regular file';
    default:
      return `cannot be read (${code ?? 'error'})`;
  }
}

/**
 * A regular source file of at most `maxBytes`, read whole with the caller's identity. `uid` is
 * who reads (for the reason); a root reader accepts only files every user may read.
 */
export function readSourceFile(path: string, maxBytes: number, uid: number): Result<Buffer, string> {
  if (!isAbsolute(path)) return fail('is a relative path in the line table (no compilation directory)');
  let fd: number;
  try {
    fd = openSync(path, O_RDONLY | O_NONBLOCK);
  } catch (e) {
    return fail(ioFailure(e, uid));
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return fail(`is ${fileKind(st)}, not a regular file`);
    if (uid === 0 && (st.mode & S_IROTH) === 0) {
      return fail('is not readable by every user (a root job shows only such files)');
    }
    if (st.size > maxBytes) return fail(`is larger than ${maxBytes} bytes (${st.size})`);
    // One byte more than allowed: a file that grows while it is read (or a /proc file that says
    // size 0) is still refused past the cap.
    const buf = Buffer.alloc(maxBytes + 1);
    let n = 0;
    for (;;) {
      const got = readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n > maxBytes) return fail(`is larger than ${maxBytes} bytes`);
    }
    return { ok: true, value: buf.subarray(0, n) };
  } catch (e) {
    return fail(ioFailure(e, uid));
  } finally {
    closeSync(fd);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: false });

/** The lines of a file's text, without their line ends (\n, \r\n). */
export function splitLines(bytes: Buffer): string[] {
  const lines = utf8.decode(bytes).split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
}

/** The excerpt of `line` (1-based) from a file's lines, or why there is none. */
export function excerptFromLines(
  file: string,
  line: number,
  lines: readonly string[],
  limits: Pick<SourceLimits, 'contextLines' | 'maxLineChars'> = SOURCE_LIMITS,
): SourceExcerpt {
  if (line > lines.length) {
    return unreadable(
      file,
      line,
      `has ${lines.length} lines, not ${line} (changed since the program was built?)`,
    );
  }
  const first = Math.max(1, line - limits.contextLines);
  const last = Math.min(lines.length, line + limits.contextLines);
  return {
    file,
    line,
    first,
    lines: lines.slice(first - 1, last).map((l) => clipText(l, limits.maxLineChars)),
  };
}

function unreadable(file: string, line: number, why: string): SourceExcerpt {
  return { file, line, unreadable: clipText(why, MAX_SOURCE_REASON_CHARS) };
}

/**
 * The excerpts of one read (one reader request). Keeps the last file's lines (the ranks of a
 * job mostly stop in the same file), counts the distinct files it opened against the cap, and
 * gives each file:line once.
 */
export class SourceExcerpts {
  private readonly given = new Set<string>();
  private readonly opened = new Set<string>();
  private last: { readonly file: string; readonly lines: Result<string[], string> } | null = null;

  constructor(
    private readonly uid: number = process.geteuid?.() ?? -1,
    private readonly limits: SourceLimits = SOURCE_LIMITS,
  ) {}

  /** `r` with the excerpts its threads' user frames need and no earlier rank of this read got. */
  attach(r: RankSnapshot): RankSnapshot {
    if (r.threads === undefined) return r;
    const out: SourceExcerpt[] = [];
    for (const p of sourcePlaces(r)) {
      if (out.length >= this.limits.maxExcerptsPerRank) break;
      const key = `${p.line}\u0000${p.file}`;
      if (this.given.has(key)) continue;
      this.given.add(key);
      out.push(this.excerpt(p.file, p.line));
    }
    return out.length === 0 ? r : { ...r, sources: out };
  }

  private excerpt(file: string, line: number): SourceExcerpt {
    const lines = this.linesOf(file);
    return lines.ok
      ? excerptFromLines(file, line, lines.value, this.limits)
      : unreadable(file, line, lines.error);
  }

  private linesOf(file: string): Result<string[], string> {
    if (this.last?.file === file) return this.last.lines;
    if (!this.opened.has(file) && this.opened.size >= this.limits.maxFiles) {
      return fail(`was not read: this read already opened ${this.limits.maxFiles} source files`);
    }
    this.opened.add(file);
    const bytes = readSourceFile(file, this.limits.maxFileBytes, this.uid);
    const lines: Result<string[], string> = bytes.ok ? { ok: true, value: splitLines(bytes.value) } : bytes;
    this.last = { file, lines };
    return lines;
  }
}
