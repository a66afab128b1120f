// Expected failures are values; bugs throw (Perfetto ui/src/base/result.ts).
import type { MqdError } from './errors.js';

export type Result<T, E = MqdError> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: E };

export const ok = <T>(value: T): Result<T, never> => ({ ok: true, value });
export const err = <E>(error: E): Result<never, E> => ({ ok: false, error });
