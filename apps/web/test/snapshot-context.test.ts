import { SnapshotIndex, syntheticStacksJob } from '@mqd/model';
import { describe, expect, it, vi } from 'vitest';
import { explanationOf } from '../src/explanation.js';
import { contextOf, Derived } from '../src/snapshot-context.js';
import { factsOfSnapshot } from '../src/snapshot-facts.js';
import { computeStackTree } from '../src/stacks/stack-tree.js';
import { fourRanks } from './fixtures.js';

describe('the snapshot context', () => {
  it('is one per snapshot and derives each answer once, on first use', () => {
    const s = fourRanks();
    const c = contextOf(s);
    expect(contextOf(s)).toBe(c);
    expect(contextOf(fourRanks())).not.toBe(c);
    expect(c.index).toBeInstanceOf(SnapshotIndex);
    expect(c.index).toBe(c.index);
    expect(c.index.n).toBe(s.ranks.length);
    // The matrix's edges and the explanation the views read are the context's.
    expect(factsOfSnapshot(s).edges).toBe(c.edges);
    expect(c.explanation.peek()).toBeUndefined();
    const e = explanationOf(s);
    expect(c.explanation.peek()).toBe(e);
    expect(explanationOf(s)).toBe(e);
  });

  it('keys stack trees by their options, whatever object carries them', () => {
    const s = syntheticStacksJob({ ranks: 8 });
    const c = contextOf(s);
    expect(c.stackTree({ threads: 'main' })).toBe(c.stackTree({ threads: 'main' }));
    expect(c.stackTree({ threads: 'all' })).not.toBe(c.stackTree({ threads: 'main' }));
    expect(c.stackTree({ threads: 'main', by: 'line' })).toBe(c.stackTree({ by: 'line', threads: 'main' }));
    // The Stacks view's trees are the context's too.
    expect(computeStackTree(s, 'main')).toBe(computeStackTree(s, 'main'));
  });

  it('turns a failed derivation into an answer that says why, computed once', () => {
    const compute = vi.fn(() => {
      throw new Error('bad snapshot');
    });
    const quiet = vi.spyOn(console, 'error').mockImplementation(() => {});
    const d = new Derived('analysis', compute);
    expect(d.get()).toEqual({ failed: 'bad snapshot' });
    expect(d.get()).toEqual({ failed: 'bad snapshot' });
    expect(compute).toHaveBeenCalledTimes(1);
    quiet.mockRestore();
  });
});
