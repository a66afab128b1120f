import { describe, expect, it } from 'vitest';
import { formatCoreSource, formatSignal } from '../src/format.js';

describe('where a snapshot of cores came from', () => {
  it('names the count and the signal, or each signal when they differ', () => {
    expect(formatCoreSource([{ signal: 6 }, { signal: 6 }])).toBe('read from 2 core files (signal SIGABRT)');
    expect(formatCoreSource([{ signal: 11 }])).toBe('read from 1 core file (signal SIGSEGV)');
    expect(formatCoreSource([{ signal: 6 }, { signal: 3 }])).toBe(
      'read from 2 core files (signals SIGQUIT, SIGABRT)',
    );
    expect(formatCoreSource([])).toBe('read from 0 core files');
  });

  it('says a core without a signal was captured from a running process', () => {
    expect(formatSignal(0)).toBe('none: live capture');
    expect(formatSignal(40)).toBe('signal 40');
  });
});
