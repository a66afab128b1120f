// When the first view drawn from a snapshot's overview is on screen. The whole snapshot of a large
// job is fetched after that: parsing it holds the page's only thread for seconds, and the verdict
// and matrix the overview already holds must not wait behind it. A view that draws nothing from
// the overview says so at once (markShown), as does an overview that failed. The whole snapshot
// is fetched regardless AFTER_OVERVIEW_MS after the overview arrived (arrived), or
// WITHOUT_OVERVIEW_MS after the wait began when the overview takes that long (the server still
// making it): a page never waits on the overview alone.
const AFTER_OVERVIEW_MS = 3000;
const WITHOUT_OVERVIEW_MS = 8000;

interface Gate {
  shown: boolean;
  /** The AFTER_OVERVIEW_MS timer (arrived), cleared once the view is shown. */
  timer: ReturnType<typeof setTimeout> | undefined;
  readonly promise: Promise<void>;
  readonly resolve: () => void;
}
const gates = new Map<string, Gate>();

function gate(key: string): Gate {
  let g = gates.get(key);
  if (g === undefined) {
    let resolve = () => {};
    const promise = new Promise<void>((r) => {
      resolve = r;
    });
    g = { shown: false, timer: undefined, promise, resolve };
    gates.set(key, g);
    // Keys are per snapshot; a page opens few. Keep the map from growing without end anyway.
    if (gates.size > 64) {
      const oldest = gates.keys().next();
      if (!oldest.done) gates.delete(oldest.value);
    }
  }
  return g;
}

/** The first frame from the overview of snapshot `key` is on screen (or nothing will be drawn from it). */
export function markShown(key: string): void {
  const g = gate(key);
  g.shown = true;
  clearTimeout(g.timer);
  g.resolve();
}

/** The overview of `key` arrived: its first view has AFTER_OVERVIEW_MS to be drawn. */
export function arrived(key: string): void {
  const g = gate(key);
  if (g.shown || g.timer !== undefined) return;
  g.timer = setTimeout(g.resolve, AFTER_OVERVIEW_MS);
}

/** Resolves once `key`'s first view is shown, or after the caps above. */
export function whenShown(key: string): Promise<void> {
  const g = gate(key);
  if (g.shown) return Promise.resolve();
  let cap: ReturnType<typeof setTimeout> | undefined;
  const capped = new Promise<void>((r) => {
    cap = setTimeout(r, WITHOUT_OVERVIEW_MS);
  });
  return Promise.race([g.promise, capped]).finally(() => clearTimeout(cap));
}

// The frame drawn from an overview's first part (the matrix's first level, before its edge table
// is here). The rest of the overview (11 MB at 100,000 ranks: joined, checked, copied to the
// matrix's worker) is read only after it, so that work does not hold that frame back; the
// matrix says so with markFirstFrame (also when it draws nothing from the first part), and the
// rest is read anyway after FIRST_FRAME_CAP_MS.
const FIRST_FRAME_CAP_MS = 1000;
const firstFrames = new Map<string, () => void>();

/** The matrix's frame from the first part of `key`'s overview is on screen (or will not be drawn). */
export function markFirstFrame(key: string): void {
  firstFrames.get(key)?.();
}

/** Resolves once markFirstFrame(key) is called, or after FIRST_FRAME_CAP_MS. */
export function whenFirstFrame(key: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(cap);
      if (firstFrames.get(key) === done) firstFrames.delete(key);
      resolve();
    };
    const cap = setTimeout(done, FIRST_FRAME_CAP_MS);
    firstFrames.set(key, done);
  });
}
