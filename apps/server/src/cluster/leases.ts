// Background work that must run once per cluster, not once per instance: the
// auto-snapshots, the retention sweep and the hang watch's rounds. Each is a named lease in the
// store (StorePort.tryLease: a row with its holder and expiry, taken when free, expired or
// already ours). Every instance renews its leases every renewMs; a lease lives ttlMs, so when
// its holder dies (kill -9) another instance takes the work over within ttlMs + renewMs.
// holds() is synchronous: the timers of the background work ask it before each round.
// With SQLite there is one instance and tryLease always gives the lease to it.
import type { StorePort } from '../store/store-port.js';

export interface LeasesOptions {
  readonly renewMs: number;
  readonly ttlMs: number;
  readonly log?: { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };
}

export const LEASE_NAMES = ['auto-snapshots', 'retention', 'watch'] as const;
export type LeaseName = (typeof LEASE_NAMES)[number];

export class Leases {
  private readonly held = new Map<LeaseName, boolean>();
  private timer: NodeJS.Timeout | null = null;
  private renewing: Promise<void> | null = null;

  constructor(
    private readonly store: StorePort,
    readonly instance: string,
    private readonly o: LeasesOptions,
  ) {}

  /** Whether this instance holds the lease now (as of the last renewal). */
  holds(name: LeaseName): boolean {
    // One instance (SQLite): everything is its own, and nothing is written to say so.
    if (this.store.dialect === 'sqlite') return true;
    return this.held.get(name) ?? false;
  }

  /** Takes or renews every lease it can; a store that cannot be reached holds nothing. */
  renew(): Promise<void> {
    if (this.renewing !== null) return this.renewing;
    this.renewing = (async () => {
      for (const name of LEASE_NAMES) {
        let now: boolean;
        try {
          now = await this.store.tryLease(name, this.instance, this.o.ttlMs);
        } catch (e) {
          // Unreachable or read-only: not ours any more (another instance may take it).
          now = false;
          this.o.log?.warn({ lease: name, err: String(e) }, 'could not renew a cluster lease');
        }
        const before = this.held.get(name) ?? false;
        if (now !== before) {
          this.o.log?.info(
            { lease: name, instance: this.instance },
            now ? 'took the lease' : 'lost the lease',
          );
        }
        this.held.set(name, now);
      }
    })().finally(() => {
      this.renewing = null;
    });
    return this.renewing;
  }

  /** Renews now and then every renewMs until stop() (on PostgreSQL: several instances). */
  async start(): Promise<void> {
    if (this.store.dialect === 'sqlite') return;
    await this.renew();
    if (this.timer !== null) return;
    this.timer = setInterval(() => void this.renew(), this.o.renewMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.renewing;
    this.held.clear();
  }
}
