// Helpers shared by the route plugins.
import { ensureExists } from '@mqd/model';
import type { FastifyRequest } from 'fastify';
import type { PluginOpts } from '../app.js';
import type { User } from '../types.js';

export const errorRef = { $ref: 'ApiError#' } as const;
/** OpenAPI: routes that need a login accept a bearer token or the session cookie. */
export const security = [{ bearer: [] }, { session: [] }];

export const currentUser = (req: FastifyRequest): User => ensureExists(req.user, 'request.user');

export const rateLimited = (p: PluginOpts) => ({
  rateLimit: { max: p.s.config.rateLimitMax, timeWindow: p.s.config.rateLimitWindowMs },
});
