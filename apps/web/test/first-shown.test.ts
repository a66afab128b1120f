// The gate that holds a large snapshot's whole fetch until the overview's first view is on
// screen: it opens when the view is shown, 3 s after the overview arrived, or after 8 s at
// most; and it leaves no timer behind once it is open.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { arrived, markShown, whenShown } from '../src/first-shown.js';

describe('first-shown gate', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const settled = (p: Promise<void>) => {
    let done = false;
    void p.then(() => {
      done = true;
    });
    return () => done;
  };

  it('opens when the first view is shown, and no timer outlives it', async () => {
    const done = settled(whenShown('snap:a'));
    arrived('snap:a');
    await vi.advanceTimersByTimeAsync(100);
    expect(done()).toBe(false);
    markShown('snap:a');
    await vi.advanceTimersByTimeAsync(0);
    expect(done()).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    // Shown already: a later wait does not wait.
    const again = settled(whenShown('snap:a'));
    await vi.advanceTimersByTimeAsync(0);
    expect(again()).toBe(true);
  });

  it('opens 3 s after the overview arrived when nothing is drawn', async () => {
    const done = settled(whenShown('snap:b'));
    arrived('snap:b');
    await vi.advanceTimersByTimeAsync(2999);
    expect(done()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(done()).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('opens after 8 s when the overview never comes', async () => {
    const done = settled(whenShown('snap:c'));
    await vi.advanceTimersByTimeAsync(7999);
    expect(done()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(done()).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});
