// The logins of the /ui namespace (browsers). A socket logs in the way a REST request does
// (session cookie, bearer token, or the trusted proxy's header), joins the rooms of what its
// user may see (the access rule of auth.ts, canSee), and is disconnected as soon as its login no
// longer holds: token revoked, session logged out or expired, user given other rights. No event
// reaches a socket whose REST requests would be refused.
import { MqdException } from '@mqd/model';
import type { Namespace, Socket } from 'socket.io';
import { type Auth, type Credential, canSee } from '../auth/auth.js';
import type { User } from '../shared/types.js';

const ADMINS = 'admins';
const uidRoom = (uid: number) => `uid:${uid}`;

/** The rooms an event about a job of `uid` goes to (who is in them is roomsOf's business). */
export const jobRooms = (uid: number): string[] => [ADMINS, uidRoom(uid)];

/**
 * The rooms a user's socket joins. The uid room only when canSee lets the user see that uid's
 * jobs: a non-admin mapped to uid 0 sees none of root's, so hears none of their events.
 */
export function roomsOf(user: User): string[] {
  if (user.admin) return [ADMINS];
  return user.uid !== null && canSee(user, { uid: user.uid }) ? [uidRoom(user.uid)] : [];
}

const sameRights = (a: User, b: User): boolean =>
  a.id === b.id && a.name === b.name && a.uid === b.uid && a.admin === b.admin;

export class UiSessions {
  /** Each connected socket's login: who, and with what (checked again by recheck()). */
  private readonly logins = new WeakMap<Socket, { readonly user: User; readonly credential: Credential }>();
  /** Tells the other aggregator instances to recheck theirs (several instances). */
  private peers: (() => void) | null = null;

  /** `tell` is called by every recheck() that a change of logins asked for (not the periodic one). */
  tellPeers(tell: () => void): void {
    this.peers = tell;
  }

  constructor(
    private readonly nsp: Namespace,
    private readonly auth: Auth,
  ) {
    nsp.use((socket, next) => {
      const token = (socket.handshake.auth as Record<string, unknown> | undefined)?.['token'];
      const headers = {
        ...socket.handshake.headers,
        ...(typeof token === 'string' ? { authorization: `Bearer ${token}` } : {}),
      };
      // A store failure (read-only, unreachable) refuses the handshake with its code; the
      // promise never rejects into socket.io.
      auth.resolve(headers, socket.conn.remoteAddress).then(
        (r) => {
          if (!r.ok) return next(Object.assign(new Error(r.error.message), { data: { code: r.error.code } }));
          this.logins.set(socket, r.value);
          next();
        },
        (e: unknown) => {
          const code = e instanceof MqdException ? e.error.code : 'MQD_E_INTERNAL';
          next(Object.assign(new Error(e instanceof Error ? e.message : String(e)), { data: { code } }));
        },
      );
    });
    nsp.on('connection', (socket) => {
      const login = this.logins.get(socket);
      if (login === undefined) {
        socket.disconnect(true);
        return;
      }
      for (const room of roomsOf(login.user)) void socket.join(room);
    });
  }

  /** The user a connected socket logged in as (undefined: not one of this namespace's). */
  userOf(socket: Socket): User | undefined {
    return this.logins.get(socket)?.user;
  }

  /**
   * Checks every socket's login again: one whose credential no longer logs anyone in (revoked,
   * logged out, expired), or whose user now has other rights (rooms joined under the old ones),
   * is disconnected; the browser reconnects under its current login, if any. Returns how many.
   * Called after every change of users, tokens or sessions, and periodically for expiry. The other
   * instances of a cluster are told to recheck too, unless `local` (the periodic check, which
   * each runs, and the recheck another instance asked for).
   */
  async recheck(o: { readonly local?: boolean } = {}): Promise<number> {
    if (o.local !== true) this.peers?.();
    let n = 0;
    for (const socket of [...this.nsp.sockets.values()]) {
      const login = this.logins.get(socket);
      const now = login === undefined ? null : await this.auth.userOf(login.credential);
      if (!socket.connected) continue;
      if (login !== undefined && now !== null && sameRights(now, login.user)) continue;
      socket.disconnect(true);
      n++;
    }
    return n;
  }
}
