// Who is asking: users log in with a token (kept only as its sha256) and get a session, sent
// back as an HttpOnly cookie and as a bearer token. A trusted reverse proxy may name the user
// in a header instead, but only when the configuration says so.
import { createHash, randomBytes } from 'node:crypto';
import { BlockList, isIPv4 } from 'node:net';
import { err, mqdError, ok, type Result } from '@mqd/model';
import type { Store } from './store.js';
import type { User } from './types.js';

export const SESSION_COOKIE = 'mqd_session';
export const ADMIN_NAME = 'admin';

export const hashToken = (t: string): string => createHash('sha256').update(t, 'utf8').digest('hex');
/** 192 random bits, URL-safe. */
export const newToken = (): string => randomBytes(24).toString('base64url');

export interface AuthOptions {
  readonly store: Store;
  readonly clock: () => number;
  readonly sessionTtlSeconds: number;
  /** Life of the login tokens of created users; 0 = never expire. */
  readonly loginTokenTtlSeconds?: number;
  /** Lower-case header name, or null when no proxy is trusted. */
  readonly proxyUserHeader: string | null;
  /** Peers (addresses/CIDRs, config.ts parseCidr) whose proxyUserHeader is believed. */
  readonly trustedProxies: readonly { address: string; prefix: number; family: 'ipv4' | 'ipv6' }[];
}

/** Is `peer` (a socket's remote address) one of the trusted proxies? */
export function makeProxyCheck(list: AuthOptions['trustedProxies']): (peer: string | undefined) => boolean {
  const bl = new BlockList();
  for (const c of list) bl.addSubnet(c.address, c.prefix, c.family);
  return (peer) => {
    if (peer === undefined || list.length === 0) return false;
    // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
    const v4 = peer.startsWith('::ffff:') ? peer.slice(7) : peer;
    return isIPv4(v4) ? bl.check(v4, 'ipv4') : bl.check(peer, 'ipv6');
  };
}

export type Headers = Readonly<Record<string, string | string[] | undefined>>;

function cookie(header: string | string[] | undefined, name: string): string | null {
  const raw = Array.isArray(header) ? header.join(';') : (header ?? '');
  for (const part of raw.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return safeDecode(part.slice(eq + 1).trim());
  }
  return null;
}

/** A malformed %-escape in a cookie is the client's mistake: no credential, never a throw. */
function safeDecode(v: string): string | null {
  try {
    return decodeURIComponent(v);
  } catch (e) {
    if (e instanceof URIError) return null;
    throw e;
  }
}

export class Auth {
  private readonly fromProxy: (peer: string | undefined) => boolean;
  constructor(private readonly o: AuthOptions) {
    this.fromProxy = makeProxyCheck(o.trustedProxies);
  }

  /** Makes sure the admin user exists and holds `token` (a fresh one when null); returns it. */
  ensureAdmin(token: string | null): string {
    const t = token ?? newToken();
    this.o.store.upsertUser({ name: ADMIN_NAME, uid: null, admin: true, tokenHash: hashToken(t) });
    return t;
  }

  createUser(name: string, uid: number | null, admin: boolean): { user: User; token: string } {
    const token = newToken();
    const ttl = this.o.loginTokenTtlSeconds ?? 0;
    const user = this.o.store.upsertUser({
      name,
      uid,
      admin,
      tokenHash: hashToken(token),
      tokenExpiresAt: ttl > 0 ? this.o.clock() + ttl * 1000 : null,
    });
    return { user, token };
  }

  /** Exchanges a login token for a session. */
  login(token: string): Result<{ user: User; session: string; expiresAt: number }> {
    const user = this.o.store.loginToken(hashToken(token));
    if (user === 'expired') return err(mqdError('MQD_E_TOKEN_EXPIRED', 'this login token has expired'));
    if (!user) return err(mqdError('MQD_E_UNAUTHENTICATED', 'unknown login token'));
    const session = newToken();
    const expiresAt = this.o.clock() + this.o.sessionTtlSeconds * 1000;
    this.o.store.createSession(hashToken(session), user.id, expiresAt);
    return ok({ user, session, expiresAt });
  }

  logout(headers: Headers): void {
    const s = this.credential(headers);
    if (s !== null) this.o.store.deleteSession(hashToken(s));
  }

  /** A session token or a login token. */
  fromToken(token: string): User | null {
    const h = hashToken(token);
    return this.o.store.userBySession(h) ?? this.o.store.userByTokenHash(h);
  }

  private credential(headers: Headers): string | null {
    const a = headers['authorization'];
    if (typeof a === 'string' && /^Bearer\s+/i.test(a)) return a.replace(/^Bearer\s+/i, '').trim();
    return cookie(headers['cookie'], SESSION_COOKIE);
  }

  /**
   * `peer` is the TCP peer's address (never X-Forwarded-For): the proxy user header counts only
   * from a configured proxy, and never names the built-in admin (admins log in with a token).
   */
  fromHeaders(headers: Headers, peer?: string): Result<User> {
    if (this.o.proxyUserHeader !== null && this.fromProxy(peer)) {
      const name = headers[this.o.proxyUserHeader];
      if (typeof name === 'string' && name.length > 0) {
        if (name === ADMIN_NAME) {
          return err(
            mqdError(
              'MQD_E_FORBIDDEN',
              `the proxy may not name the built-in '${ADMIN_NAME}'; log in with its token`,
            ),
          );
        }
        const user = this.o.store.userByName(name);
        if (user) return ok(user);
        return err(
          mqdError(
            'MQD_E_UNAUTHENTICATED',
            `the proxy names user '${name.slice(0, 64)}', who has no MQD account (an admin adds users with POST /api/admin/users)`,
          ),
        );
      }
    }
    const token = this.credential(headers);
    if (token === null) return err(mqdError('MQD_E_UNAUTHENTICATED', 'no session cookie or bearer token'));
    const user = this.fromToken(token);
    if (user) return ok(user);
    if (this.o.store.loginToken(hashToken(token)) === 'expired') {
      return err(mqdError('MQD_E_TOKEN_EXPIRED', 'this login token has expired'));
    }
    return err(mqdError('MQD_E_UNAUTHENTICATED', 'the session expired or the token is unknown'));
  }
}

/** May this user see and snapshot a job owned by `uid`? */
/**
 * A user sees and snapshots the jobs of their own uid; admins see every job. Jobs of uid 0 are
 * for admins only (even a user mapped to uid 0 is not one): that is what lets the snapshot
 * path ask agents to read root's ranks (ReadOptions.allowRoot) for those jobs alone.
 */
export const mayAccess = (user: User, uid: number): boolean => user.admin || (user.uid === uid && uid !== 0);
