// Who is asking: users log in with a token (kept only as its sha256) and get a session, sent
// back as an HttpOnly cookie and as a bearer token. A trusted reverse proxy may name the user
// in a header instead, but only when the configuration says so.
import { createHash, randomBytes } from 'node:crypto';
import { BlockList, isIPv4 } from 'node:net';
import { err, mqdError, ok, type Result } from '@mqd/model';
import type { User } from '../shared/types.js';
import type { StorePort } from '../store/store-port.js';

export const SESSION_COOKIE = 'mqd_session';
export const ADMIN_NAME = 'admin';
/** Who auto-snapshots are by (their createdBy and audit rows). */
export const AUTO_SNAPSHOTTER = 'auto';
/** Who the hang watch acts as in the audit trail and on the snapshots and share links it makes. */
export const WATCH_PRINCIPAL = 'watch';
/**
 * Names MQD itself acts under (and two it keeps for itself): a user created with one would
 * replace the configured admin until a restart, or pass for the auto-snapshotter or the hang
 * watch in the audit trail. Compared case-insensitively, so 'Admin' cannot pose as any. What a
 * principal may do never rests on its name alone: the watch's share links are marked as made
 * by the system in the store (ShareRecord.madeBy), so a user named 'watch' from before the name
 * was reserved owns none of them.
 */
export const RESERVED_NAMES: readonly string[] = [
  ADMIN_NAME,
  AUTO_SNAPSHOTTER,
  WATCH_PRINCIPAL,
  'system',
  'mqd',
];
export const isReservedName = (name: string): boolean => RESERVED_NAMES.includes(name.toLowerCase());

/**
 * What a request or socket logged in with, kept so a socket's login can be checked again later
 * (revoked, logged out, expired): a token's hash (session or login token), or the name a trusted
 * proxy gave.
 */
export type Credential =
  | { readonly kind: 'token'; readonly hash: string }
  | { readonly kind: 'proxy'; readonly name: string };

export const hashToken = (t: string): string => createHash('sha256').update(t, 'utf8').digest('hex');
/** 192 random bits, URL-safe. */
export const newToken = (): string => randomBytes(24).toString('base64url');

export interface AuthOptions {
  readonly store: StorePort;
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
  async ensureAdmin(token: string | null): Promise<string> {
    const t = token ?? newToken();
    await this.o.store.upsertUser({ name: ADMIN_NAME, uid: null, admin: true, tokenHash: hashToken(t) });
    return t;
  }

  /** Creates a user (or gives an existing one new rights and a new token); never a reserved name. */
  async createUser(
    name: string,
    uid: number | null,
    admin: boolean,
  ): Promise<Result<{ user: User; token: string }>> {
    if (isReservedName(name)) {
      return err(
        mqdError('MQD_E_RESERVED_NAME', `'${name}' is reserved (${RESERVED_NAMES.join(', ')} are MQD's own)`),
      );
    }
    const token = newToken();
    const ttl = this.o.loginTokenTtlSeconds ?? 0;
    const user = await this.o.store.upsertUser({
      name,
      uid,
      admin,
      tokenHash: hashToken(token),
      tokenExpiresAt: ttl > 0 ? this.o.clock() + ttl * 1000 : null,
    });
    return ok({ user, token });
  }

  /**
   * Exchanges a login token for a session. `headers` are the request's: a live session cookie of
   * another user is never replaced unless `switchUser` says the person asked for it (a link with
   * another user's `?token=` would otherwise sign an admin's browser in as that user: login CSRF).
   * On a switch the old session ends.
   */
  async login(
    token: string,
    headers: Headers = {},
    switchUser = false,
  ): Promise<Result<{ user: User; session: string; expiresAt: number }>> {
    const user = await this.o.store.loginToken(hashToken(token));
    if (user === 'expired') return err(mqdError('MQD_E_TOKEN_EXPIRED', 'this login token has expired'));
    if (!user) return err(mqdError('MQD_E_UNAUTHENTICATED', 'unknown login token'));
    const old = cookie(headers['cookie'], SESSION_COOKIE);
    const current = old === null ? null : await this.o.store.userBySession(hashToken(old));
    if (current !== null && current.id !== user.id && !switchUser) {
      return err(
        mqdError(
          'MQD_E_SESSION_CONFLICT',
          `this browser is signed in as '${current.name}' and the token is '${user.name}'s; the session was kept (send switchUser: true to replace it)`,
        ),
      );
    }
    const session = newToken();
    const expiresAt = this.o.clock() + this.o.sessionTtlSeconds * 1000;
    // The token is checked again where the session is made (one store transaction): a token
    // revoked since the check above makes no session.
    const made = await this.o.store.loginSession(hashToken(token), hashToken(session), expiresAt);
    if (made === 'expired') return err(mqdError('MQD_E_TOKEN_EXPIRED', 'this login token has expired'));
    if (made === null) return err(mqdError('MQD_E_UNAUTHENTICATED', 'unknown login token'));
    // The switched-from session ends once the new one exists (never neither).
    if (current !== null && current.id !== made.id && old !== null) {
      await this.o.store.deleteSession(hashToken(old));
    }
    return ok({ user: made, session, expiresAt });
  }

  async logout(headers: Headers): Promise<void> {
    const s = this.credential(headers);
    if (s !== null) await this.o.store.deleteSession(hashToken(s));
  }

  /** A session token or a login token. */
  fromToken(token: string): Promise<User | null> {
    return this.userOf({ kind: 'token', hash: hashToken(token) });
  }

  /** The user this credential logs in now; null once it was revoked, logged out or expired. */
  async userOf(c: Credential): Promise<User | null> {
    if (c.kind === 'proxy') return isReservedName(c.name) ? null : this.o.store.userByName(c.name);
    return (await this.o.store.userBySession(c.hash)) ?? (await this.o.store.userByTokenHash(c.hash));
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
  async fromHeaders(headers: Headers, peer?: string): Promise<Result<User>> {
    const r = await this.resolve(headers, peer);
    return r.ok ? ok(r.value.user) : r;
  }

  /** The user and the credential they logged in with (for sockets, checked again later). */
  async resolve(headers: Headers, peer?: string): Promise<Result<{ user: User; credential: Credential }>> {
    if (this.o.proxyUserHeader !== null && this.fromProxy(peer)) {
      const name = headers[this.o.proxyUserHeader];
      if (typeof name === 'string' && name.length > 0) {
        if (isReservedName(name)) {
          return err(
            mqdError(
              'MQD_E_FORBIDDEN',
              `the proxy may not name '${name.slice(0, 64)}' (reserved: ${RESERVED_NAMES.join(', ')}); the built-in '${ADMIN_NAME}' logs in with its token`,
            ),
          );
        }
        const user = await this.o.store.userByName(name);
        if (user) return ok({ user, credential: { kind: 'proxy', name } });
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
    const credential: Credential = { kind: 'token', hash: hashToken(token) };
    const user = await this.userOf(credential);
    if (user) return ok({ user, credential });
    if ((await this.o.store.loginToken(credential.hash)) === 'expired') {
      return err(mqdError('MQD_E_TOKEN_EXPIRED', 'this login token has expired'));
    }
    return err(mqdError('MQD_E_UNAUTHENTICATED', 'the session expired or the token is unknown'));
  }
}

/**
 * The one access rule for jobs, and everything of a job (its snapshots, its starter, its cores,
 * its /ui events, its place in lists): a user sees and snapshots the jobs of their own uid;
 * admins see every job. Jobs of uid 0 are for admins only (even a user mapped to uid 0 is not
 * one): that is what lets the snapshot path ask agents to read root's ranks
 * (ReadOptions.allowRoot) for those jobs alone. A user without a uid sees none.
 */
export const canSee = (user: User, job: { readonly uid: number }): boolean =>
  user.admin || (user.uid !== null && user.uid === job.uid && job.uid !== 0);
