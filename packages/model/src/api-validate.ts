// Decoding at the edge for the REST API and the /ui events (api-spec.ts): what the web reads
// from the aggregator, and what the server's tests check every reply against. A body that does
// not match is an MQD_E_BAD_INPUT Result naming the first field that is wrong, never a value
// with a silently missing field. Browser-safe; interpreted TypeBox (no code generation, so it
// runs under the dashboard's Content-Security-Policy).

import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import {
  API_ROUTES,
  ApiErrorBody,
  type ApiErrorBody as ApiErrorBodyT,
  type ApiResponse,
  type RouteName,
  UI_EVENTS,
  type UiEventName,
  type UiEventPayload,
} from './api-spec.js';
import { decodeOverview } from './edges/overview.js';
import { type MqdError, mqdError } from './errors.js';
import { err, ok, type Result } from './result.js';
import { validateSnapshot } from './snapshot-validate.js';

// The snapshot inside a response is checked by validateSnapshot (schema and invariants) once;
// the reference only stands in for it while the rest of the body is checked.
const SNAPSHOT_PLACEHOLDER = Type.Unknown({ $id: 'JobSnapshot' });
const REFERENCES: TSchema[] = [ApiErrorBody, SNAPSHOT_PLACEHOLDER];

function firstError(schema: TSchema, value: unknown): string {
  const e = Value.Errors(schema, REFERENCES, value).First();
  return e ? `${e.path || '/'}: ${e.message}` : 'does not match';
}

/** `value` checked against `schema` (which may reference the shared ApiError and JobSnapshot). */
export function checkShape<T extends TSchema>(
  schema: T,
  value: unknown,
  what: string,
): Result<Static<T>, MqdError> {
  if (Value.Check(schema, REFERENCES, value)) return ok(value as Static<T>);
  return err(
    mqdError('MQD_E_BAD_INPUT', `${what} does not match the API spec at ${firstError(schema, value)}`),
  );
}

/**
 * The success body of `route`, checked against API_ROUTES (and its snapshot, if it carries
 * one, against the snapshot format with its invariants).
 */
export function decodeResponse<N extends RouteName>(
  route: N,
  body: unknown,
): Result<ApiResponse<N>, MqdError> {
  const spec = API_ROUTES[route];
  const what = `${spec.method} /api${spec.url}`;
  if ('overview' in spec) {
    // A binary body: its own framing and checks (decodeOverview), not a JSON schema.
    if (!(body instanceof Uint8Array))
      return err(mqdError('MQD_E_BAD_INPUT', `${what}: the body is not binary`));
    const d = decodeOverview(body);
    return d.ok ? ok(body as ApiResponse<N>) : err(mqdError('MQD_E_BAD_INPUT', `${what}: ${d.error}`));
  }
  const checked = checkShape(spec.response, body, what);
  if (!checked.ok) return checked;
  if ('snapshotAt' in spec) {
    const at = spec.snapshotAt;
    const snap = at === '' ? body : (body as Record<string, unknown>)[at];
    const v = validateSnapshot(snap);
    if (!v.ok)
      return err(mqdError('MQD_E_BAD_INPUT', `${what}${at === '' ? '' : ` .${at}`}: ${v.error.message}`));
  }
  return ok(checked.value as ApiResponse<N>);
}

/** An error reply of the aggregator, or null when the body is not one (a proxy's page). */
export function decodeErrorBody(body: unknown): ApiErrorBodyT | null {
  return Value.Check(ApiErrorBody, body) ? body : null;
}

export function isUiEventName(name: string): name is UiEventName {
  return Object.hasOwn(UI_EVENTS, name);
}

/** A /ui event's payload checked against UI_EVENTS and the invariants the schema cannot say. */
export function decodeUiEvent<N extends UiEventName>(
  name: N,
  payload: unknown,
): Result<UiEventPayload<N>, MqdError> {
  const checked = checkShape(UI_EVENTS[name], payload, `/ui event ${name}`);
  if (!checked.ok) return checked;
  const v = checked.value as UiEventPayload<N>;
  if (name === 'snapshot.progress') {
    const p = v as UiEventPayload<'snapshot.progress'>;
    if (p.received > p.expected) {
      return err(
        mqdError('MQD_E_BAD_INPUT', `/ui event ${name}: received ${p.received} > expected ${p.expected}`),
      );
    }
  }
  return ok(v);
}
