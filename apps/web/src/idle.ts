// The app-idle signal browser tests wait on (never on sleeps): document.body.dataset.mqdIdle
// is 'false' while anything fetches, aggregates or has a frame pending, and turns 'true' only
// after the count has stayed at zero through two animation frames and tasks, so a fetch that
// an effect starts right after a render cannot slip between "idle" and "busy". Views that
// prepare data in steps also hold the count themselves (useBusyWhile) from their first commit.
let busy = 0;
let settle = 0;

function publish(idle: boolean): void {
  if (typeof document === 'undefined' || !document.body) return;
  const value = idle ? 'true' : 'false';
  if (document.body.dataset['mqdIdle'] !== value) document.body.dataset['mqdIdle'] = value;
}

function scheduleSettle(): void {
  if (typeof requestAnimationFrame === 'undefined') {
    publish(busy === 0);
    return;
  }
  const ticket = ++settle;
  // Two frames, each followed by a task: a React update chain (render, effect, state, render)
  // that crosses one frame boundary still begins its next busy period before this ends.
  const quiet = () => ticket === settle && busy === 0;
  requestAnimationFrame(() => {
    setTimeout(() => {
      if (!quiet()) return;
      requestAnimationFrame(() => {
        setTimeout(() => {
          if (quiet()) publish(true);
        }, 0);
      });
    }, 0);
  });
}

/** Marks the app busy until the returned function is called (calling it twice is harmless). */
export function beginBusy(): () => void {
  busy++;
  settle++;
  publish(false);
  let done = false;
  return () => {
    if (done) return;
    done = true;
    busy--;
    if (busy === 0) scheduleSettle();
  };
}

export function trackBusy<T>(p: Promise<T>): Promise<T> {
  const end = beginBusy();
  return p.finally(end);
}

/** Called once at start-up: the app is idle once its first effects have settled. */
export function initIdle(): void {
  publish(false);
  scheduleSettle();
}
