// The agents' credentials: a per-host token derived from the agent secret, and a constant-time
// check of a token given.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** The SHA-256 of a token, as tokenMatches compares it. */
export const tokenDigest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/** Constant-time token check: both sides hashed first so neither length nor prefix leaks. */
export function tokenMatches(given: unknown, expectedDigest: Buffer): boolean {
  return typeof given === 'string' && timingSafeEqual(tokenDigest(given), expectedDigest);
}

/**
 * The credential of one node: HMAC-SHA256 of its host name under the aggregator's agent secret.
 * A node's token is worthless for any other host name, so a stolen token cannot impersonate
 * the agent of another node (`mqd agent-token --host NAME` prints it; see SECURITY.md).
 */
export function hostAgentToken(secret: string, host: string): string {
  return `h1.${createHmac('sha256', secret).update(`mqd-agent:${host}`, 'utf8').digest('base64url')}`;
}
