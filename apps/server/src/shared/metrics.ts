// The aggregator's metrics in the Prometheus text exposition format (version 0.0.4), for the
// admins' Prometheus and Grafana (docs/grafana-dashboard.json). Written here: a handful of
// counters, gauges read at scrape time (asynchronously: the store's counts are awaited), and one
// histogram, which is all we need.
//
// Names follow Prometheus conventions: `mqd_` prefix, `_total` for counters, base units
// (seconds, bytes). Label values are escaped (backslash, double quote, newline).

export type Labels = Readonly<Record<string, string>>;

const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const labelText = (l: Labels) => {
  const keys = Object.keys(l).sort();
  return keys.length === 0 ? '' : `{${keys.map((k) => `${k}="${escapeLabel(l[k] ?? '')}"`).join(',')}}`;
};
const num = (n: number) => (Number.isFinite(n) ? String(n) : n > 0 ? '+Inf' : n < 0 ? '-Inf' : 'NaN');

interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  render(): string[] | Promise<string[]>;
}

export class Counter implements Family {
  readonly type = 'counter';
  private readonly values = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels: Labels = {}, by = 1): void {
    const k = labelText(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  render(): string[] {
    return [...this.values].map(([l, v]) => `${this.name}${l} ${num(v)}`);
  }
}

type GaugeValue = ReadonlyArray<readonly [Labels, number]> | number;

/** A gauge whose values are read when scraped (job counts, store size...), possibly awaited. */
export class Gauge implements Family {
  readonly type = 'gauge';
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly read: () => GaugeValue | Promise<GaugeValue>,
  ) {}
  async render(): Promise<string[]> {
    const v = await this.read();
    if (typeof v === 'number') return [`${this.name} ${num(v)}`];
    return v.map(([l, x]) => `${this.name}${labelText(l)} ${num(x)}`);
  }
}

export class Histogram implements Family {
  readonly type = 'histogram';
  private readonly counts: number[];
  private sum = 0;
  private count = 0;
  constructor(
    readonly name: string,
    readonly help: string,
    private readonly buckets: readonly number[],
  ) {
    this.counts = buckets.map(() => 0);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    this.buckets.forEach((b, i) => {
      if (v <= b) this.counts[i] = (this.counts[i] ?? 0) + 1;
    });
  }
  render(): string[] {
    return [
      ...this.buckets.map((b, i) => `${this.name}_bucket{le="${num(b)}"} ${this.counts[i] ?? 0}`),
      `${this.name}_bucket{le="+Inf"} ${this.count}`,
      `${this.name}_sum ${num(this.sum)}`,
      `${this.name}_count ${this.count}`,
    ];
  }
}

export class MetricsRegistry {
  private readonly families: Family[] = [];
  add<F extends Family>(f: F): F {
    if (this.families.some((x) => x.name === f.name)) throw new Error(`metric ${f.name} registered twice`);
    this.families.push(f);
    return f;
  }
  /** The exposition text; every family with its HELP and TYPE lines, ending in a newline. */
  async render(): Promise<string> {
    // Every family is read at once (the gauges' store reads overlap), then written in order.
    const bodies = await Promise.all(this.families.map((f) => f.render()));
    const out: string[] = [];
    this.families.forEach((f, i) => {
      out.push(`# HELP ${f.name} ${f.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`);
      out.push(`# TYPE ${f.name} ${f.type}`);
      out.push(...(bodies[i] ?? []));
    });
    return `${out.join('\n')}\n`;
  }
}

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** What the snapshot service reports; the server turns it into the families below. */
export interface SnapshotMetrics {
  snapshotTaken(o: { seconds: number; outcome: 'ok' | 'partial' | 'failed' }): void;
  ranksRead(o: { ok: number; failedByCode: ReadonlyMap<string, number> }): void;
}

/** The snapshot families: counters and the duration histogram. */
export function snapshotMetrics(reg: MetricsRegistry): SnapshotMetrics {
  const taken = reg.add(
    new Counter('mqd_snapshots_total', 'Snapshots taken, by outcome (ok, partial, failed).'),
  );
  const duration = reg.add(
    new Histogram(
      'mqd_snapshot_duration_seconds',
      'Wall time of a snapshot, from the request to the merged job snapshot.',
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    ),
  );
  const ranksOk = reg.add(new Counter('mqd_ranks_read_total', 'Ranks whose queues were read.'));
  const ranksFailed = reg.add(
    new Counter('mqd_ranks_failed_total', 'Ranks that could not be read, by error code (the reason).'),
  );
  // Every series a dashboard plots exists from the start, at zero.
  for (const outcome of ['ok', 'partial', 'failed']) taken.inc({ outcome }, 0);
  ranksOk.inc({}, 0);
  return {
    snapshotTaken({ seconds, outcome }) {
      taken.inc({ outcome });
      duration.observe(seconds);
    },
    ranksRead({ ok, failedByCode }) {
      ranksOk.inc({}, ok);
      for (const [code, n] of failedByCode) ranksFailed.inc({ code }, n);
    },
  };
}

/** What the hang watcher reports (apps/server/src/watch/watcher.ts). */
export interface WatchMetrics {
  sampled(): void;
  stopped(seconds: number): void;
  budgetSkipped(): void;
  notified(outcome: 'ok' | 'failed'): void;
}

/** One live watched job as mqd_job_state shows it. */
export interface JobStateSeries {
  readonly job: string;
  readonly user: string;
  readonly partition: string;
  readonly state: string;
}

/** Series of mqd_job_state at most: a runaway discovery must not blow up Prometheus. */
export const MAX_JOB_STATE_SERIES = 2000;

/** The hang watch's families: its counters, and each live job's state (read at scrape time). */
export function watchMetrics(
  reg: MetricsRegistry,
  jobs: () => Promise<readonly JobStateSeries[]>,
): WatchMetrics {
  reg.add(
    new Gauge(
      'mqd_job_state',
      `1 for each live discovered job, labelled with its hang-watch state (at most ${MAX_JOB_STATE_SERIES} jobs).`,
      async () => (await jobs()).slice(0, MAX_JOB_STATE_SERIES).map((j) => [{ ...j }, 1] as const),
    ),
  );
  const samples = reg.add(new Counter('mqd_watch_samples_total', 'Samples the hang watch took of jobs.'));
  const stop = reg.add(
    new Counter(
      'mqd_watch_stop_seconds_total',
      'Time ranks spent stopped by the hang watch, summed over ranks.',
    ),
  );
  const skips = reg.add(
    new Counter(
      'mqd_watch_budget_skips_total',
      "Samples without a stop because a rank's stop budget for the hour was used up.",
    ),
  );
  const notes = reg.add(
    new Counter(
      'mqd_watch_notifications_total',
      'Hang notifications sent to webhooks, by outcome (ok, failed).',
    ),
  );
  samples.inc({}, 0);
  stop.inc({}, 0);
  skips.inc({}, 0);
  for (const outcome of ['ok', 'failed']) notes.inc({ outcome }, 0);
  return {
    sampled: () => samples.inc(),
    stopped: (s) => stop.inc({}, s),
    budgetSkipped: () => skips.inc(),
    notified: (outcome) => notes.inc({ outcome }),
  };
}
