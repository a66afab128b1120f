// Which cores `mqd snapshot --core/--cores` reads: per-core --rank/--exe, a directory by its
// capture manifest (checked: it may only name files of its own directory) or by file names.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { rankFromCoreName } from '@mqd/core';
import { afterAll, describe, expect, it } from 'vitest';
import { coresFromDir, coresFromTokens, MANIFEST_FORMAT, readManifest } from '../src/core-args.js';

const dir = mkdtempSync(join(tmpdir(), 'mqd-core-args-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tokensOf = (args: string[]) =>
  parseArgs({
    args,
    options: {
      core: { type: 'string', multiple: true },
      rank: { type: 'string', multiple: true },
      exe: { type: 'string', multiple: true },
    },
    tokens: true,
  }).tokens;

describe('--core CORE [--rank N] [--exe EXE]', () => {
  it('gives --rank and --exe to the core before them, a leading --exe to all', () => {
    expect(
      coresFromTokens(tokensOf(['--exe', '/a', '--core', 'x', '--rank', '3', '--core', 'y', '--exe', '/b'])),
    ).toEqual([
      { path: 'x', rank: 3, exe: '/a' },
      { path: 'y', exe: '/b' },
    ]);
  });
  it('refuses a --rank before any --core and a rank that is not a number', () => {
    expect(coresFromTokens(tokensOf(['--rank', '1', '--core', 'x']))).toMatchObject({ code: 'MQD_E_USAGE' });
    expect(coresFromTokens(tokensOf(['--core', 'x', '--rank', 'one']))).toMatchObject({
      code: 'MQD_E_USAGE',
    });
  });
  it('numbers cores by their names when nothing else says', () => {
    expect(['rank-3.core', 'core.rank12', 'app.rank_7.core', 'core.1234'].map(rankFromCoreName)).toEqual([
      3,
      12,
      7,
      null,
    ]);
  });
});

describe('--cores DIR', () => {
  it('reads a capture manifest; refuses one that points outside its directory', () => {
    const d = mkdtempSync(join(dir, 'cap-'));
    const manifest = (core: string) => ({
      format: MANIFEST_FORMAT,
      capturedAt: '2026-11-23T00:00:00.000Z',
      host: 'node7',
      starterPid: null,
      ranks: [{ rank: 0, pid: 10, core, executable: '/x', bytes: 1 }],
      failed: [],
    });
    writeFileSync(join(d, 'manifest.json'), JSON.stringify(manifest('rank-0.core')));
    expect(coresFromDir(d)).toEqual([{ path: join(d, 'rank-0.core'), rank: 0, host: 'node7' }]);
    for (const evil of ['../../etc/shadow', '/etc/shadow', 'sub/rank-0.core', '.hidden']) {
      writeFileSync(join(d, 'manifest.json'), JSON.stringify(manifest(evil)));
      expect(readManifest(join(d, 'manifest.json'))).toMatchObject({ code: 'MQD_E_CORE_MANIFEST' });
      expect(coresFromDir(d)).toMatchObject({ code: 'MQD_E_CORE_MANIFEST' });
    }
    writeFileSync(join(d, 'manifest.json'), '{"format":"something else"}');
    expect(coresFromDir(d)).toMatchObject({ code: 'MQD_E_CORE_MANIFEST' });
  });
  it('without a manifest takes every core-looking file, and says when there is none', () => {
    const d = mkdtempSync(join(dir, 'plain-'));
    expect(coresFromDir(d)).toMatchObject({ code: 'MQD_E_USAGE' });
    for (const f of ['core.101', 'rank-1.core', 'notes.txt', 'core']) writeFileSync(join(d, f), '');
    expect(coresFromDir(d, '/bin/app')).toEqual(
      ['core', 'core.101', 'rank-1.core'].map((f) => ({ path: join(d, f), exe: '/bin/app' })),
    );
  });
});
