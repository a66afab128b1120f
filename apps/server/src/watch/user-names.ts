// A uid's name as people read it: a dashboard user of that uid, else the aggregator node's
// passwd entry (root for 0), else null (the views then say "uid N"). Passwd is read once a
// minute at most.
import { readFileSync } from 'node:fs';
import type { StorePort } from '../store/store-port.js';

const PASSWD_MS = 60_000;
let passwd: { at: number; names: Map<number, string> } | null = null;

/** uid -> name from a passwd file's text ("name:x:uid:gid:..."). */
export function parsePasswd(text: string): Map<number, string> {
  const names = new Map<number, string>();
  for (const line of text.split('\n')) {
    const [name, , uid] = line.split(':');
    const n = Number(uid);
    if (name !== undefined && name !== '' && Number.isInteger(n) && n >= 0 && !names.has(n))
      names.set(n, name);
  }
  return names;
}

/** The node's passwd name of a uid, or null. */
export function passwdName(uid: number, now: number = Date.now(), file = '/etc/passwd'): string | null {
  if (passwd === null || now - passwd.at > PASSWD_MS) {
    let names = new Map<number, string>();
    try {
      names = parsePasswd(readFileSync(file, 'utf8'));
    } catch {
      // No passwd to read: names come from the dashboard's users only.
    }
    passwd = { at: now, names };
  }
  return passwd.names.get(uid) ?? null;
}

/** Names of these uids (the store's users first, then passwd). */
export async function userNames(
  store: Pick<StorePort, 'userNameOfUid'>,
  uids: Iterable<number>,
): Promise<Map<number, string | null>> {
  const out = new Map<number, string | null>();
  for (const uid of new Set(uids)) out.set(uid, (await store.userNameOfUid(uid)) ?? passwdName(uid));
  return out;
}
