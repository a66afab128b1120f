/** Ends every exhaustive switch: the compiler proves it unreachable, the runtime reports a bug. */
export function assertUnreachable(x: never): never {
  throw new Error(`unreachable: ${JSON.stringify(x)}`);
}

/** Instead of `!`: a value that must exist, with a message when it does not (a bug). */
export function ensureExists<T>(v: T | null | undefined, what = 'value'): T {
  if (v === null || v === undefined) throw new Error(`${what} unexpectedly missing`);
  return v;
}
