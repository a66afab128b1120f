// The Values view's two calls: a snapshot that reads expressions on every rank (the snapshot
// request with `evals`), and a stored snapshot's values aggregated on the server (groups,
// min/max, outliers, value against rank: never every rank's value). Same transport rules as
// api.ts: the session cookie, the spec's decoder at the edge, coded errors.
import {
  type ApiEvalRequest,
  type ApiValueSummary,
  codedText,
  decodeErrorBody,
  decodeResponse,
  err,
  IDEMPOTENCY_KEY_HEADER,
  ok,
  type SnapshotId,
  SnapshotId as toSnapshotId,
} from '@mqd/model';
import type { ApiError, ApiResult } from '../api.js';
import type { EvalAsk } from '../url-state.js';

type Route = 'takeSnapshot' | 'snapshotValues';

async function call(
  route: Route,
  path: string,
  init: RequestInit,
  signal?: AbortSignal,
): Promise<ApiResult<unknown>> {
  const where = `${init.method ?? 'GET'} ${path}`;
  let res: Response;
  let json: unknown;
  try {
    res = await fetch(path, { ...init, credentials: 'same-origin', ...(signal ? { signal } : {}) });
    const text = await res.text();
    json = text === '' ? null : JSON.parse(text);
  } catch (e: unknown) {
    const code = signal?.aborted ? 'MQD_E_ABORTED' : 'MQD_E_NETWORK';
    return err(failure(code, 0, `${where} failed (${e instanceof Error ? e.message : String(e)})`));
  }
  if (!res.ok) {
    const e = decodeErrorBody(json);
    return err(
      e !== null && e.code !== ''
        ? { status: res.status, code: e.code, message: codedText(e) }
        : failure('MQD_E_BAD_RESPONSE', res.status, `${where}: HTTP ${res.status}`),
    );
  }
  const decoded = decodeResponse(route, json);
  return decoded.ok
    ? ok(decoded.value as unknown)
    : err(failure('MQD_E_BAD_RESPONSE', res.status, `${where}: ${decoded.error.message}`));
}

function failure(code: string, status: number, detail: string): ApiError {
  return { status, code, message: `${code}: ${detail}` };
}

function requestKey(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join(
    '',
  );
}

/** The asks as the server takes them (api-spec.ts ApiEvalRequest). */
export function evalRequests(asks: readonly EvalAsk[]): ApiEvalRequest[] {
  return asks.map((a) => ({
    expr: a.expr,
    ...(a.frame === null ? {} : { frame: a.frame }),
    ...(a.progress === true ? { progress: true as const } : {}),
  }));
}

/** Takes a snapshot of `job` whose ranks read `asks` in the same stop; the new snapshot's id. */
export async function takeSnapshotWithValues(
  job: string,
  asks: readonly EvalAsk[],
): Promise<ApiResult<SnapshotId>> {
  const r = await call('takeSnapshot', `/api/jobs/${encodeURIComponent(job)}/snapshots`, {
    method: 'POST',
    headers: {
      accept: 'application/json',
      'content-type': 'application/json',
      [IDEMPOTENCY_KEY_HEADER]: requestKey(),
    },
    body: JSON.stringify({ evals: evalRequests(asks) }),
  });
  return r.ok ? ok(toSnapshotId((r.value as { snapshot: { id: string } }).snapshot.id)) : r;
}

/** The stored snapshot's values, aggregated by the server. */
export async function snapshotValues(
  id: SnapshotId,
  signal?: AbortSignal,
): Promise<ApiResult<ApiValueSummary[]>> {
  const r = await call(
    'snapshotValues',
    `/api/snapshots/${encodeURIComponent(id)}/values`,
    { method: 'GET', headers: { accept: 'application/json' } },
    signal,
  );
  return r.ok ? ok((r.value as { values: ApiValueSummary[] }).values) : r;
}
