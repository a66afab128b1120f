// The route schemas, made from the API spec of packages/model (api-spec.ts): request
// validation (fastify's ajv), response serialisation, the OpenAPI document and, through the
// TypeBox type provider, the handlers' request and reply types all come from API_ROUTES. No
// shape is written here; this file only adds what is the server's business (OpenAPI security).
import { ApiErrorBody, ApiErrorRef, JobSnapshot, type RouteSpec, type SHARED_SCHEMA_IDS } from '@mqd/model';

/** OpenAPI: routes that need a login accept a bearer token or the session cookie. */
export const security = [{ bearer: [] }, { session: [] }];

/** The schemas routes refer to by $id, registered once on the root instance. */
export const SHARED_SCHEMAS: readonly Record<string, unknown>[] = [
  ApiErrorBody,
  // The snapshot format is a plain TypeBox schema; here it gets the $id the routes refer to.
  { ...JobSnapshot, $id: 'JobSnapshot' satisfies (typeof SHARED_SCHEMA_IDS)[number] },
];

type Prop<R, K extends string> = R extends { readonly [P in K]: infer S } ? S : undefined;

/** A route's Fastify schema: its types follow from the spec entry `R`. */
export type RouteSchema<R extends RouteSpec> = {
  readonly tags: string[];
  readonly summary: string;
  readonly description?: string;
  readonly security?: typeof security;
  readonly hide?: boolean;
  readonly params: Prop<R, 'params'>;
  readonly querystring: Prop<R, 'querystring'>;
  readonly body: Prop<R, 'body'>;
  readonly headers: Prop<R, 'headers'>;
  readonly response: { readonly [S in R['status']]: R['response'] } & {
    readonly [S in R['errors'][number]]: typeof ApiErrorRef;
  };
};

/**
 * The schema of route `r` (an API_ROUTES entry). `body` replaces the spec's body where the
 * server narrows it with its configuration (the share TTL maximum); it must have the same type.
 */
export function routeSchema<R extends RouteSpec>(
  r: R,
  over: { readonly body?: Prop<R, 'body'> } = {},
): RouteSchema<R> {
  const response: Record<number, unknown> = { [r.status]: r.response };
  for (const code of r.errors) response[code] = ApiErrorRef;
  const schema: Record<string, unknown> = {
    tags: [r.tag],
    summary: r.summary,
    response,
  };
  if (r.description !== undefined) schema['description'] = r.description;
  if (r.auth !== 'public') schema['security'] = security;
  if (r.hide) schema['hide'] = true;
  if (r.params) schema['params'] = r.params;
  if (r.querystring) schema['querystring'] = r.querystring;
  if (r.headers) schema['headers'] = r.headers;
  const body = over.body ?? r.body;
  if (body) schema['body'] = body;
  return schema as RouteSchema<R>;
}

/** Method, URL (under /api) and schema of route `r`: spread into `app.route({..., handler})`. */
export const routeOf = <R extends RouteSpec>(r: R, over: { readonly body?: Prop<R, 'body'> } = {}) => ({
  method: r.method,
  url: r.url,
  schema: routeSchema(r, over),
});
