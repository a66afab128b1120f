// The source excerpt reader: the lines around a user frame, only from a
// regular file of bounded size, never blocking on a FIFO, and with the identity of whoever
// reads (the reader runs as the job's owner): a file the owner cannot read is a reason, not
// its lines; a root reader shows only files every user may read.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  excerptLines,
  MAX_SOURCE_LINE_CHARS,
  type RankSnapshot,
  type SourceExcerpt,
  sourceExcerptFor,
} from '@mqd/model';
import { afterAll, describe, expect, it } from 'vitest';
import {
  excerptFromLines,
  readSourceFile,
  SOURCE_LIMITS,
  SourceExcerpts,
} from '../src/reader/source-excerpts.js';
import { NOBODY } from './security-kit.js';

const dir = mkdtempSync(join(tmpdir(), 'mqd-source-'));
chmodSync(dir, 0o755);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MAIN_C = Array.from({ length: 40 }, (_, i) => `line ${i + 1}`).join('\n');

function write(name: string, text: string, mode = 0o644): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  chmodSync(p, mode);
  return p;
}

function rank(rankNo: number, frames: { file: string; line: number }[], host = 'n1'): RankSnapshot {
  return {
    rank: rankNo,
    pid: 100 + rankNo,
    host,
    state: { kind: 'ok' },
    pausedMicros: 1,
    communicators: [],
    threads: frames.map((f, i) => ({
      tid: 100 + rankNo + i,
      name: null,
      main: i === 0,
      truncated: false,
      error: null,
      frames: [
        {
          pc: '0x1',
          function: 'PMPI_Recv',
          module: '/usr/lib/libmpi.so.40',
          file: null,
          line: null,
          inlined: false,
        },
        { pc: '0x2', function: 'main', module: '/bin/app', file: f.file, line: f.line, inlined: false },
      ],
    })),
  };
}

const lines = (e: SourceExcerpt | undefined) => (e !== undefined && 'lines' in e ? e.lines : null);
const reason = (e: SourceExcerpt | undefined) => (e !== undefined && 'unreadable' in e ? e.unreadable : null);

describe('source excerpts', () => {
  it('gives the lines around the frame line (±6), clipped, with the line in them', () => {
    const long = 'x'.repeat(MAX_SOURCE_LINE_CHARS + 50);
    const text = MAIN_C.split('\n')
      .map((l, i) => (i === 20 ? long : l))
      .join('\r\n');
    const p = write('main.c', text);
    const read = readSourceFile(p, SOURCE_LIMITS.maxFileBytes, 1000);
    expect(read.ok).toBe(true);
    const got = new SourceExcerpts(1000).attach(rank(0, [{ file: p, line: 20 }]));
    const e = got.sources?.[0];
    expect(e).toMatchObject({ file: p, line: 20, first: 14 });
    const ls = lines(e) ?? [];
    expect(ls).toHaveLength(13);
    expect(ls[0]).toBe('line 14');
    expect(ls[6]).toBe('line 20');
    expect(ls[7]?.length).toBe(MAX_SOURCE_LINE_CHARS);
    expect(ls[7]?.endsWith('\u2026')).toBe(true);
    // The view's lines: numbered, the frame's line marked.
    const shown = e ? excerptLines(e) : [];
    expect(shown.find((l) => l.current)).toEqual({ no: 20, text: 'line 20', current: true });
    // Near the start and past the end.
    expect(excerptFromLines(p, 2, MAIN_C.split('\n'))).toMatchObject({ first: 1 });
    expect(excerptFromLines(p, 41, MAIN_C.split('\n'))).toMatchObject({
      unreadable: expect.stringMatching(/has 40 lines/),
    });
  });

  it('refuses a file over the size cap before reading it', () => {
    const p = write('big.c', 'a'.repeat(5000));
    const r = readSourceFile(p, 4096, 1000);
    expect(r).toEqual({ ok: false, error: 'is larger than 4096 bytes (5000)' });
  });

  it('never blocks on a FIFO: its open returns at once and it is refused as not a regular file', () => {
    const fifo = join(dir, 'fifo.c');
    execFileSync('mkfifo', [fifo]);
    const t0 = Date.now();
    expect(readSourceFile(fifo, 4096, 1000)).toEqual({ ok: false, error: 'is a FIFO, not a regular file' });
    expect(Date.now() - t0).toBeLessThan(2000);
    // A link to it is followed, and refused the same way.
    symlinkSync(fifo, join(dir, 'link-to-fifo.c'));
    expect(readSourceFile(join(dir, 'link-to-fifo.c'), 4096, 1000)).toEqual({
      ok: false,
      error: 'is a FIFO, not a regular file',
    });
  });

  it('refuses what is not a regular file, a relative path and a missing file', () => {
    mkdirSync(join(dir, 'sub.c'));
    expect(readSourceFile(join(dir, 'sub.c'), 4096, 1000)).toEqual({
      ok: false,
      error: 'is a directory, not a regular file',
    });
    expect(readSourceFile('/dev/null', 4096, 1000)).toEqual({
      ok: false,
      error: 'is a device, not a regular file',
    });
    expect(readSourceFile('src/main.c', 4096, 1000)).toMatchObject({ ok: false, error: /relative path/ });
    expect(readSourceFile(join(dir, 'gone.c'), 4096, 1000)).toEqual({
      ok: false,
      error: 'does not exist on this host',
    });
  });

  it('as root shows only files every user may read', () => {
    const p = write('secret.c', MAIN_C, 0o600);
    expect(readSourceFile(p, 4096, 0)).toMatchObject({ ok: false, error: /not readable by every user/ });
    expect(readSourceFile(write('open.c', MAIN_C, 0o644), 4096, 0).ok).toBe(true);
  });

  it('reads with the identity of the process: a file uid 65534 cannot read gives a reason, not its lines', () => {
    const secret = write('owner-only.c', MAIN_C, 0o600);
    const open = write('everyone.c', MAIN_C, 0o644);
    const script = fileURLToPath(new URL('./source-excerpts-as.ts', import.meta.url));
    const out = execFileSync(
      'setpriv',
      [
        `--reuid=${NOBODY}`,
        `--regid=${NOBODY}`,
        '--clear-groups',
        process.execPath,
        '--conditions=source',
        '--import',
        'tsx',
        script,
        secret,
        open,
      ],
      {
        encoding: 'utf8',
        env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: '/tmp' },
        timeout: 30_000,
      },
    );
    const [a, b] = JSON.parse(out) as SourceExcerpt[];
    expect(reason(a)).toBe(`is not readable by uid ${NOBODY}`);
    expect(lines(b)?.[6]).toBe('line 20');
  });

  it('gives each file:line once per read, caps the files a read opens, and the view finds it for every rank of the host', () => {
    const p = write('shared.c', MAIN_C);
    const read = new SourceExcerpts(1000, { ...SOURCE_LIMITS, maxFiles: 2 });
    const r0 = read.attach(rank(0, [{ file: p, line: 20 }]));
    const r1 = read.attach(rank(1, [{ file: p, line: 20 }]));
    const r2 = read.attach(
      rank(2, [
        { file: write('b.c', MAIN_C), line: 5 },
        { file: write('c.c', MAIN_C), line: 5 },
      ]),
    );
    expect(r0.sources).toHaveLength(1);
    expect(r1.sources).toBeUndefined();
    expect(lines(r2.sources?.[0])).not.toBeNull();
    expect(reason(r2.sources?.[1])).toMatch(/already opened 2 source files/);
    const other = rank(3, [{ file: p, line: 20 }], 'n2');
    const snap = {
      schemaVersion: 1 as const,
      takenAt: '2026-01-01T00:00:00.000Z',
      durationMicros: 1,
      mpi: { library: 'openmpi' as const, dll: null, lengthUnit: 'bytes' as const },
      ranks: [r0, r1, r2, other],
    };
    expect(sourceExcerptFor(snap, r1, { file: p, line: 20 })).toBe(r0.sources?.[0]);
    // Another host's file of the same name may differ: not borrowed.
    expect(sourceExcerptFor(snap, other, { file: p, line: 20 })).toBeNull();
  });
});
