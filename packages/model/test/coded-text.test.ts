// A coded error reads with its code once wherever it is printed: the diagnosis's not-read line,
// a rank's tooltip, the OpenMP summary, and the views that show the code apart.
import {
  analyzeOpenMp,
  codedText,
  explainSnapshot,
  mqdError,
  rankNotReadText,
  textAfterCode,
} from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { ompiJob, op } from './analysis/fixtures.js';

const timeout = mqdError('MQD_E_DLL_TIMEOUT', 'reading 3 ranks took over 5000 ms');

const count = (s: string, what: string) => s.split(what).length - 1;

describe('codedText', () => {
  it('keeps a message that already begins with its code as it is', () => {
    expect(codedText(timeout)).toBe(timeout.message);
    expect(count(codedText(timeout), 'MQD_E_DLL_TIMEOUT')).toBe(1);
  });

  it('puts the code in front of a message without it (a DLL’s own words)', () => {
    expect(codedText({ code: 'MQD_E_DLL_ERROR', message: 'bad communicator' })).toBe(
      'MQD_E_DLL_ERROR: bad communicator',
    );
  });

  it('does not take a longer code for this one', () => {
    // MQD_E_DLL is a prefix of MQD_E_DLL_TIMEOUT, not its code.
    expect(codedText({ code: 'MQD_E_DLL', message: 'MQD_E_DLL_TIMEOUT: x' })).toBe(
      'MQD_E_DLL: MQD_E_DLL_TIMEOUT: x',
    );
  });

  it('gives the text after the code for views that show the code apart', () => {
    expect(textAfterCode(timeout)).toBe(
      'reading 3 ranks took over 5000 ms: the DLL did not answer in time (likely looping on corrupt queues); this snapshot is lost, take another',
    );
    expect(textAfterCode({ code: 'MQD_E_DLL_ERROR', message: 'bad communicator' })).toBe('bad communicator');
  });
});

describe('coded errors printed once', () => {
  const snap = ompiJob(3, (r) => ({ sends: [op({ peer: (r + 1) % 3, tag: 1 })] }));
  snap.ranks[2] = {
    rank: 2,
    pid: 1002,
    host: 'n1',
    state: { kind: 'error', code: timeout.code, message: timeout.message },
    pausedMicros: null,
    communicators: [],
  };

  it('in the diagnosis’s line about the ranks it could not read', () => {
    const [line] = explainSnapshot(snap).partialReasons;
    expect(line).toContain('(reading it failed, MQD_E_DLL_TIMEOUT: reading 3 ranks took over 5000 ms:');
    expect(count(line ?? '', 'MQD_E_DLL_TIMEOUT')).toBe(1);
  });

  it('in a rank’s not-read tooltip', () => {
    const t = rankNotReadText(snap.ranks[2] as (typeof snap.ranks)[number]) ?? '';
    expect(t).toMatch(/^rank 2 not read: .*\. MQD_E_DLL_TIMEOUT: reading 3 ranks/);
    expect(count(t, 'MQD_E_DLL_TIMEOUT')).toBe(1);
  });

  it('in the OpenMP summary of a rank whose OMPD library failed', () => {
    const r0 = snap.ranks[0] as (typeof snap.ranks)[number];
    const withOmp = {
      ...snap,
      ranks: [{ ...r0, openmpError: mqdError('MQD_E_OMPD_FAILED', 'ompd_rc_error') }],
    };
    const s = analyzeOpenMp(withOmp);
    const shown = JSON.stringify(s);
    expect(shown).toContain('MQD_E_OMPD_FAILED: ompd_rc_error');
    expect(shown).not.toContain('MQD_E_OMPD_FAILED: MQD_E_OMPD_FAILED');
  });
});
