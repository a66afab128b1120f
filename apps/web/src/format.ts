// Display formatting shared by the views.
import { type LengthUnit, type Operation, opLengthUnit, type QueueKind, type RankSnapshot } from '@mqd/model';
import type { KindUnit } from './matrix-types.js';

// How a communicator and a program read are the model's (the overview's matrix and header use them).
export { commLabel, programOf } from '@mqd/model';

/**
 * One formatter for every time shown: `toLocaleString` with options builds a new
 * Intl.DateTimeFormat on each call, milliseconds each, and a page shows dozens of times while
 * it draws its first view.
 */
let timeFormat: Intl.DateTimeFormat | null = null;

export function formatTime(iso: string | null): string {
  if (iso === null) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  timeFormat ??= new Intl.DateTimeFormat(undefined, {
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  return timeFormat.format(d);
}

const clockFormats = new Map<
  string,
  {
    clock: Intl.DateTimeFormat;
    day: Intl.DateTimeFormat;
    year: Intl.DateTimeFormat;
    dayMonth: Intl.DateTimeFormat;
  }
>();

/**
 * The one way a time of day is shown ("since", "until", "ended at"): hours and minutes in the
 * viewer's locale and time zone, the same clock as formatTime ("10:47 PM" in en-US, "22:47" in
 * en-GB), with the date before it when it is not `now`'s day ("Nov 26, 10:47 PM"). The raw text
 * when it is not a date. `timeZone` and `locale` are for tests.
 */
export function formatSince(
  at: string | number,
  now: number = Date.now(),
  timeZone?: string,
  locale?: string,
): string {
  const t = typeof at === 'number' ? at : Date.parse(at);
  if (Number.isNaN(t)) return String(at);
  const key = `${locale ?? ''}\u0001${timeZone ?? ''}`;
  let f = clockFormats.get(key);
  if (f === undefined) {
    const zone = timeZone === undefined ? {} : { timeZone };
    f = {
      clock: new Intl.DateTimeFormat(locale, { hour: '2-digit', minute: '2-digit', ...zone }),
      day: new Intl.DateTimeFormat('en-US', { year: 'numeric', month: 'short', day: 'numeric', ...zone }),
      year: new Intl.DateTimeFormat('en-US', { year: 'numeric', ...zone }),
      dayMonth: new Intl.DateTimeFormat(locale, { month: 'short', day: 'numeric', ...zone }),
    };
    clockFormats.set(key, f);
  }
  if (f.day.format(t) === f.day.format(now)) return f.clock.format(t);
  const day =
    f.year.format(t) === f.year.format(now)
      ? f.dayMonth.format(t)
      : `${f.dayMonth.format(t)}, ${f.year.format(t)}`;
  return `${day}, ${f.clock.format(t)}`;
}

export function formatClock(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

/** "3 min ago" for recent times, the date otherwise. */
export function formatAge(iso: string | null, now = Date.now()): string {
  if (iso === null) return 'never';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const s = Math.round((now - t) / 1000);
  if (s < 0) return formatTime(iso);
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return formatTime(iso);
}

const SIZE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatSize(n: number, unit: LengthUnit): string {
  if (unit === 'elements') return `${n.toLocaleString()} el.`;
  let v = n;
  let u = 0;
  while (v >= 1024 && u < SIZE_UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(v < 10 ? 1 : 0)} ${SIZE_UNITS[u]}`;
}

/**
 * An operation's length (or its actual length, `n`) in the operation's own unit: its
 * `lengthUnit` when it has one (MPICH ch4's unexpected messages count bytes), else the
 * snapshot's `unit`.
 */
export function formatOpSize(
  op: Pick<Operation, 'length' | 'lengthUnit'>,
  unit: LengthUnit,
  n = op.length,
): string {
  return formatSize(n, opLengthUnit(op, unit));
}

/** A sum of one queue kind's lengths in its unit (EdgeTable.kindUnit; `unit` the snapshot's when it has none). */
export function formatKindSize(n: number, kindUnit: KindUnit, unit: LengthUnit): string {
  return kindUnit === 'mixed' ? `${n.toLocaleString()} in mixed units` : formatSize(n, kindUnit ?? unit);
}

/**
 * What the matrix's sizes count: the snapshot's unit, then each queue kind in another one
 * ("elements; unexpected in bytes" on MPICH ch4). `kindUnit` is indexed like `kinds`.
 */
export function sizeUnitsLabel(
  kinds: readonly QueueKind[],
  kindUnit: readonly KindUnit[],
  unit: LengthUnit,
): string {
  const others = kinds.flatMap((k, i) => {
    const u = kindUnit[i] ?? null;
    return u === null || u === unit ? [] : [`${k} in ${u === 'mixed' ? 'mixed units' : u}`];
  });
  return [unit, ...others].join('; ');
}

export function formatMicros(us: number | null): string {
  if (us === null) return 'not stopped';
  if (us < 1000) return `${us} µs`;
  if (us < 1_000_000) return `${(us / 1000).toFixed(1)} ms`;
  return `${(us / 1_000_000).toFixed(2)} s`;
}

export function formatCount(n: number): string {
  return n.toLocaleString();
}

/** "ANY" for wildcards, the world rank (and the local one when it differs). */
export function formatPeer(op: Operation, resolved: number | null): string {
  if (op.peer.local === null && op.peer.global === null) return 'ANY';
  const world = resolved ?? op.peer.global;
  const local = op.peer.local;
  if (world === null) return local === null ? '?' : `local ${local} (world ?)`;
  if (local === null || local === world) return String(world);
  return `${world} (local ${local})`;
}

export function formatTag(tag: number | null): string {
  return tag === null ? 'ANY' : String(tag);
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n.toLocaleString()} ${n === 1 ? one : many}`;
}

/** Signals a core is usually written on (Linux numbers). */
const SIGNAL_NAMES: Readonly<Record<number, string>> = {
  3: 'SIGQUIT',
  4: 'SIGILL',
  5: 'SIGTRAP',
  6: 'SIGABRT',
  7: 'SIGBUS',
  8: 'SIGFPE',
  9: 'SIGKILL',
  11: 'SIGSEGV',
  15: 'SIGTERM',
};

/** "SIGABRT", "signal 40", or for 0 (a core written from a running process) "none: live capture". */
export function formatSignal(signal: number): string {
  if (signal === 0) return 'none: live capture';
  return SIGNAL_NAMES[signal] ?? `signal ${signal}`;
}

/** "read from 4 core files (signal SIGABRT)": where a snapshot of cores came from. */
export function formatCoreSource(cores: readonly { readonly signal: number }[]): string {
  const signals = [...new Set(cores.map((c) => c.signal))].sort((a, b) => a - b);
  const which =
    signals.length === 0
      ? ''
      : signals.length === 1
        ? ` (signal ${formatSignal(signals[0] ?? 0)})`
        : ` (signals ${signals.map(formatSignal).join(', ')})`;
  return `read from ${plural(cores.length, 'core file')}${which}`;
}

/**
 * An operation's status as the views show it: "pending (corrected)" when the reader overruled
 * the DLL (Operation.corrected), so a person sees the DLL said otherwise; the rank's
 * statusCorrections say why, once (correctionNotes).
 */
export function formatOpStatus(op: Pick<Operation, 'status' | 'corrected'>): string {
  return op.corrected === undefined ? op.status : `${op.status} (corrected)`;
}

/** The rank's notes on the statuses the reader corrected, one per reason: "12 operations corrected: …". */
export function correctionNotes(rank: Pick<RankSnapshot, 'statusCorrections'>): string[] {
  return (rank.statusCorrections ?? []).map(
    (c) => `${formatCount(c.count)} ${c.count === 1 ? 'operation' : 'operations'} corrected: ${c.message}`,
  );
}
