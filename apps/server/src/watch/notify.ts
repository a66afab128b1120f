// Telling people a job hangs: a JSON POST to each configured webhook, with `text` (one line,
// what Slack and Mattermost show) and `mqd` (the fields a script wants). A webhook URL often
// carries a secret (Slack's path, a token in the query): it is never logged or shown whole,
// only its origin (redactUrl). Failures are retried a couple of times with backoff, then
// logged and counted; nothing is thrown into the watch loop.
import type { WatchState } from '@mqd/model';

export interface HangNotice {
  readonly jobKey: string;
  readonly jobId: string | null;
  readonly slurmJob: string | null;
  readonly user: string | null;
  readonly uid: number;
  readonly state: WatchState;
  /** ISO 8601. */
  readonly since: string | null;
  readonly leastProgressed: string;
  readonly diagnosis: string;
  /** Share link of the snapshot that shows the hang, or null when none could be made. */
  readonly link: string | null;
  /**
   * The directories the watcher kept the ranks' cores in (policy captureCores), `host:dir`
   * when the job spans nodes; absent when no core was kept.
   */
  readonly cores?: readonly string[];
}

export interface WebhookBody {
  readonly text: string;
  readonly mqd: HangNotice;
}

export function webhookBody(n: HangNotice, program: string): WebhookBody {
  const who = n.user ?? `uid ${n.uid}`;
  const job = n.slurmJob !== null ? `Slurm job ${n.slurmJob}` : n.jobKey;
  const parts = [
    `MPI job ${job} (${program}) of ${who} is hung`,
    n.since === null ? null : `since ${n.since}`,
    n.leastProgressed === '' ? null : `least progressed: ranks ${n.leastProgressed}`,
    n.diagnosis === '' ? null : n.diagnosis,
    n.cores === undefined || n.cores.length === 0 ? null : `cores kept in ${n.cores.join(', ')}`,
    n.link,
  ].filter((x): x is string => x !== null);
  return { text: parts.join(' · ').replace(/\s+/g, ' '), mqd: n };
}

/** What may be logged of a webhook URL: scheme and host only (the rest may be a secret). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}/…`;
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
    return '<invalid URL>';
  }
}

export interface WebhookOptions {
  readonly urls: readonly string[];
  /** Per attempt. */
  readonly timeoutMs?: number;
  /** Attempts after the first one. */
  readonly retries?: number;
  /** Backoff before retry i (1-based): base * 4^(i-1) ms. */
  readonly backoffMs?: number;
  readonly fetch?: typeof fetch;
  readonly log?: (fields: Record<string, unknown>, msg: string) => void;
  readonly outcome?: (o: 'ok' | 'failed') => void;
}

/** POSTs `body` to every webhook; resolves when each succeeded or gave up (never rejects). */
export async function sendWebhooks(body: WebhookBody, o: WebhookOptions): Promise<void> {
  const f = o.fetch ?? fetch;
  const retries = o.retries ?? 2;
  const timeoutMs = o.timeoutMs ?? 10_000;
  const backoff = o.backoffMs ?? 1000;
  const text = JSON.stringify(body);
  await Promise.all(
    o.urls.map(async (url) => {
      let last = '';
      for (let attempt = 0; attempt <= retries; attempt++) {
        if (attempt > 0) await delay(backoff * 4 ** (attempt - 1));
        try {
          const res = await f(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: text,
            signal: AbortSignal.timeout(timeoutMs),
            redirect: 'error',
          });
          // The body is not ours to keep; drain it so the connection is released.
          await res.arrayBuffer().catch(() => undefined);
          if (res.ok) {
            o.outcome?.('ok');
            return;
          }
          last = `HTTP ${res.status}`;
        } catch (e) {
          last = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        }
      }
      o.outcome?.('failed');
      o.log?.(
        { event: 'watch.webhook', webhook: redactUrl(url), attempts: retries + 1, jobKey: body.mqd.jobKey },
        `the hang notification could not be delivered (${last.split(url).join(redactUrl(url))})`,
      );
    }),
  );
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => {
    const t = setTimeout(r, ms);
    t.unref();
  });
}
