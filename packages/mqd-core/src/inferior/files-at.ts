// Files a user can name or plant, opened without following their links. Node has no openat or
// mkdirat: a directory is held open (O_DIRECTORY|O_NOFOLLOW) and the names below it are reached
// through /proc/self/fd/N/NAME, which resolves NAME in that directory the way the *at calls do;
// each name is one component, created with O_EXCL (or mkdir, then reopened with O_NOFOLLOW), so
// a symlink or a swapped directory anywhere below the held one is refused instead of followed.
// Used for `mqd capture` (by a child running as the job owner: apps/cli/src/capture-owner-main.ts)
// and for the capture manifest that root reads (apps/cli/src/core-args.ts).
import {
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  type Stats,
  writeSync,
} from 'node:fs';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = constants;

/** What kind of file a stat describes, in the words an error message uses. */
export function fileKind(st: Stats): string {
  if (st.isFile()) return 'a regular file';
  if (st.isDirectory()) return 'a directory';
  if (st.isSymbolicLink()) return 'a symbolic link';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/** Why an open failed, without the path or any of the file's bytes (the caller names the file). */
export function openFailure(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ELOOP':
      return 'is a symbolic link (never followed here)';
    case 'ENOENT':
      return 'does not exist';
    case 'EACCES':
    case 'EPERM':
      return 'is not readable';
    case 'ENOTDIR':
      return 'is not a directory';
    case 'EEXIST':
      return 'already exists';
    default:
      return `cannot be opened (${code ?? 'error'})`;
  }
}

/**
 * A regular file of at most `maxBytes`, read whole. Opened O_NOFOLLOW (a symlink is refused)
 * and O_NONBLOCK (a FIFO's open returns at once instead of blocking until a writer comes), then
 * fstat'ed: anything but a regular file is refused before a byte is read.
 */
export function readRegularFile(
  path: string,
  maxBytes: number,
): { ok: true; value: Buffer } | { ok: false; why: string } {
  let fd: number;
  try {
    fd = openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (e) {
    return { ok: false, why: openFailure(e) };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { ok: false, why: `is ${fileKind(st)}, not a regular file` };
    if (st.size > maxBytes) return { ok: false, why: `is larger than ${maxBytes} bytes (${st.size})` };
    // One byte more than allowed: a file that grows while it is read is still refused.
    const buf = Buffer.alloc(maxBytes + 1);
    let n = 0;
    for (;;) {
      const got = readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n > maxBytes) return { ok: false, why: `is larger than ${maxBytes} bytes` };
    }
    return { ok: true, value: buf.subarray(0, n) };
  } catch (e) {
    return { ok: false, why: openFailure(e) };
  } finally {
    closeSync(fd);
  }
}

/** A directory held open, not followed if it is a symlink; its own stat for identity checks. */
export function openDirNoFollow(path: string): { fd: number; st: Stats } {
  const fd = openSync(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  try {
    return { fd, st: fstatSync(fd) };
  } catch (e) {
    closeSync(fd);
    throw e;
  }
}

/** `name` (one path component) inside the directory held by `dirFd`. */
export function atPath(dirFd: number, name: string): string {
  if (name === '' || name === '.' || name === '..' || name.includes('/'))
    throw new Error(`'${name}' is not a single file name`);
  return `/proc/self/fd/${dirFd}/${name}`;
}

/**
 * The subdirectory `name` of `dirFd`, created (mode) when missing, opened O_NOFOLLOW: an
 * existing symlink of that name is refused (ELOOP/ENOTDIR), never entered.
 */
export function openSubdir(dirFd: number, name: string, mode = 0o755): number {
  const p = atPath(dirFd, name);
  try {
    mkdirSync(p, { mode });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return openSync(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
}

/** A new file `name` in `dirFd`, for writing: O_CREAT|O_EXCL|O_NOFOLLOW, so nothing existing (a link included) is reused. */
export function createNew(dirFd: number, name: string, mode: number): number {
  return openSync(atPath(dirFd, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
}

/** Writes all of `data` to a new file `name` in `dirFd` (see createNew). */
export function writeNew(dirFd: number, name: string, data: string | Uint8Array, mode: number): void {
  const fd = createNew(dirFd, name, mode);
  try {
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    let off = 0;
    while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
  } finally {
    closeSync(fd);
  }
}

/**
 * Copies the regular file `from` to a new file `name` in `dirFd`, with its permission bits
 * (never set-id bits). `from` is opened O_NONBLOCK and must be a regular file (a FIFO or a
 * device put where a mapped file was is refused). Returns the bytes copied.
 */
export function copyNew(from: string, dirFd: number, name: string): number {
  const src = openSync(from, O_RDONLY | O_NONBLOCK);
  try {
    const st = fstatSync(src);
    if (!st.isFile()) throw Object.assign(new Error(`${from} is ${fileKind(st)}`), { code: 'EINVAL' });
    const dst = createNew(dirFd, name, st.mode & 0o755);
    try {
      const buf = Buffer.alloc(1 << 20);
      let total = 0;
      for (;;) {
        const n = readSync(src, buf, 0, buf.length, null);
        if (n === 0) break;
        let off = 0;
        while (off < n) off += writeSync(dst, buf, off, n - off);
        total += n;
      }
      return total;
    } finally {
      closeSync(dst);
    }
  } finally {
    closeSync(src);
  }
}
