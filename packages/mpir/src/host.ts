// Host names as ranks are grouped by. The MPIR table holds whatever name the starter used for
// a node (a short name, an FQDN, an alias from a hostfile, "localhost"); the agents and the UI
// group by one name per node: the short name in lower case, and this machine's own short name
// for every spelling of "this machine".
import { hostname } from 'node:os';
import { shortHostname } from '@mqd/core';

/** Spellings that always mean the machine the starter runs on. */
const LOOPBACK = new Set([
  'localhost',
  'localhost.localdomain',
  'localhost6',
  'ip6-localhost',
  '127.0.0.1',
  '::1',
]);

/** This machine's short name and every other spelling of it (lower case). */
export interface LocalHost {
  readonly short: string;
  readonly aliases: ReadonlySet<string>;
}

export function localHost(name: string = hostname()): LocalHost {
  const full = name.toLowerCase();
  const short = shortHostname(full);
  return { short, aliases: new Set([full, short]) };
}

/**
 * The name ranks are grouped by: short and lower case; loopback names and this machine's own
 * names become `here.short`. An IPv4/IPv6 literal other than loopback is kept whole (it has no
 * domain to strip). An empty or missing name is taken to be this machine.
 */
export function normaliseHost(name: string | null, here: LocalHost = localHost()): string {
  const n = (name ?? '').trim().toLowerCase().replace(/\.$/, '');
  if (n === '' || LOOPBACK.has(n) || n.startsWith('127.')) return here.short;
  if (here.aliases.has(n)) return here.short;
  if (/^[\d.]+$/.test(n) || n.includes(':')) return n;
  const short = shortHostname(n);
  return here.aliases.has(short) ? here.short : short;
}
