import { describe, expect, it } from 'vitest';
import { validateSnapshot } from '../src/snapshot-validate.js';
import { syntheticHaloJob } from '../src/synthetic-halo.js';

describe('synthetic halo job', () => {
  it('is valid under the snapshot schema for both libraries', () => {
    for (const library of ['openmpi', 'mpich'] as const) {
      const r = validateSnapshot(syntheticHaloJob({ ranks: 300, library, seed: 2 }));
      expect(r.ok ? 'ok' : r.error.message).toBe('ok');
    }
  });

  it('is deterministic and changes only with seed and step', () => {
    const a = JSON.stringify(syntheticHaloJob({ ranks: 200, seed: 9 }));
    expect(JSON.stringify(syntheticHaloJob({ ranks: 200, seed: 9 }))).toBe(a);
    expect(JSON.stringify(syntheticHaloJob({ ranks: 200, seed: 10 }))).not.toBe(a);
    expect(JSON.stringify(syntheticHaloJob({ ranks: 200, seed: 9, step: 1 }))).not.toBe(a);
  });

  it('states that Open MPI cannot show unexpected messages', () => {
    const s = syntheticHaloJob({ ranks: 8, library: 'openmpi' });
    const c = s.ranks[0]?.communicators[0];
    expect(c?.unexpected).toBeNull();
    expect(c?.unavailable.unexpected?.code).toBe('MQD_E_QUEUE_UNSUPPORTED');
  });
});
