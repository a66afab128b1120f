// The one /proc/PID/stat parser (src/inferior/proc.ts), on real and crafted lines.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseProcStat, procStartTime, readProcStat } from '../src/inferior/proc.js';

describe('parseProcStat', () => {
  it('reads a command with spaces and parentheses', () => {
    const rest = Array.from({ length: 50 }, (_, i) => String(i + 3)); // field numbers as values
    rest[0] = 'S';
    const st = parseProcStat(`4242 (a (b) c) ${rest.join(' ')}\n`);
    expect(st).toEqual({
      pid: 4242,
      comm: 'a (b) c',
      state: 'S',
      ppid: 4,
      pgrp: 5,
      session: 6,
      startTime: '22',
      cpuTicks: 14 + 15, // utime + stime
    });
  });
  it('refuses truncated or malformed text', () => {
    expect(parseProcStat('')).toBeNull();
    expect(parseProcStat('12 (x) S 1 2 3')).toBeNull();
    expect(parseProcStat('12 x S 1 2 3')).toBeNull();
  });
  it('agrees with this process', () => {
    const st = readProcStat(process.pid);
    expect(st?.pid).toBe(process.pid);
    expect(st?.ppid).toBe(process.ppid);
    expect(st?.state).toMatch(/^[RS]$/);
    const raw = readFileSync(`/proc/${process.pid}/stat`, 'utf8');
    expect(raw.split(' ')[21]).toBe(procStartTime(process.pid)); // comm "node" has no space
    expect(readProcStat(process.pid, process.pid)?.pid).toBe(process.pid);
    expect(readProcStat(0x3fffffff)).toBeNull();
  });
});
