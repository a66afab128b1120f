// The demo status file's check and the banner's words (demo-status.ts).

import { describe, expect, it } from 'vitest';
import { JobId } from '../src/brand.js';
import { demoBannerText, demoMoveTo, parseDemoStatus } from '../src/demo-status.js';

const building = {
  kind: 'mqd-demo',
  phase: 'building',
  step: 'Building Open MPI 4.1.4 with debug information for the real hung job',
  stepStartedAt: 1_000_000,
  estimateSeconds: 450,
  estimateBasis: 'measured: 450 s alone on an idle 2-core machine',
  syntheticJob: 'synth',
  job: 'synth',
  snapshot: 's1',
  error: null,
};

describe('demo banner', () => {
  it('counts down from the measured cost, then says the build is over time', () => {
    const st = parseDemoStatus(building);
    if (st === null) throw new Error('a valid status was refused');
    expect(demoBannerText(st, JobId('synth'), 1_000_000 + 90_000)).toContain(
      'Building Open MPI 4.1.4 with debug information for the real hung job: about 6 min 00 s left',
    );
    expect(demoBannerText(st, JobId('synth'), 1_000_000 + 500_000)).toContain(
      '8 min 20 s so far, longer than the 7 min 30 s measured',
    );
  });

  it('labels the synthetic job only where it is shown, and moves only from it', () => {
    const st = parseDemoStatus({ ...building, phase: 'real', job: 'real' });
    if (st === null) throw new Error('a valid status was refused');
    expect(demoBannerText(st, JobId('synth'), 0)).toMatch(
      /^SYNTHETIC job: .* The real hung job is up as real\.$/,
    );
    expect(demoBannerText(st, JobId('real'), 0)).toBeNull();
    expect(demoMoveTo(st, JobId('synth'))).toBe('real');
    expect(demoMoveTo(st, JobId('other'))).toBeNull();
    expect(demoMoveTo(st, null)).toBeNull();
  });

  it('refuses what is not a demo status', () => {
    expect(parseDemoStatus(null)).toBeNull();
    expect(parseDemoStatus({ ...building, kind: 'other' })).toBeNull();
    expect(parseDemoStatus({ ...building, phase: 'done' })).toBeNull();
    expect(parseDemoStatus({ ...building, estimateSeconds: -1 })).toBeNull();
    expect(parseDemoStatus({ ...building, job: 7 })).toBeNull();
  });
});
