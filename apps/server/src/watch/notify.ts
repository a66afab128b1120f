// Telling people a job hangs: a JSON POST to each configured webhook, with `text` (one line,
// what Slack and Mattermost show) and `mqd` (the fields a script wants). A webhook URL often
// carries a secret (Slack's path, a token in the query): it is never logged or shown whole,
// only its origin (redactUrl). Failures are retried a couple of times with backoff, then
// logged and counted; nothing is thrown into the watch loop.
//
// Everything in `text` that a job decides (its Slurm job name, its program, its key, the
// diagnosis that quotes its functions, core paths) goes through chatText: the chat tools read
// `text` as markup, so a job named `<!channel>` would otherwise page the channel, and one named
// `<https://evil/|https://mqd/s/…>` would show our link's words over another address. The
// only link in `text` is the share URL the server built; `mqd` keeps every value as it was.
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
  /** The notice's values as they are (not escaped), and the program's name. */
  readonly mqd: HangNotice & { readonly program: string };
}

/** Characters of one job-made value kept for `text`, before escaping (the whole value stays in `mqd`). */
export const MAX_CHAT_VALUE_CHARS = 300;

/**
 * Characters that the webhook's chat formats read as markup, each replaced by an inert
 * lookalike: Slack's mrkdwn (`*bold*`, `_it_`, `~strike~`, `` `code` ``) and Mattermost's
 * Markdown (`[text](url)` links, `|` tables); `@` begins a mention in both (`@channel`, `@here`,
 * `@everyone`, `@all`, `@someone`), and Mattermost links every @mention by itself.
 */
const INERT: Readonly<Record<string, string>> = {
  '*': '\u2217',
  '~': '\u223c',
  '`': '\u02cb',
  '|': '\u01c0',
  '[': '\uff3b',
  ']': '\uff3d',
  '@': '\uff20',
  _: '\uff3f',
};

/**
 * A value a job decides, made safe for the `text` of a Slack-style webhook: control, zero-width
 * and bidirectional-override characters dropped and whitespace folded to one space (one line,
 * read in the order it is stored); `& < >` as Slack's entities, so no `<!channel>`, `<@U…>` or
 * `<url|words>` survives; markup and mention characters as lookalikes (INERT; an `_` inside a
 * word stays: no format reads it there); `://` and every dot between a word and a letter
 * broken (U+2236, U+2024), so no chat tool links a web address or a domain name the job wrote;
 * cut at MAX_CHAT_VALUE_CHARS with "…".
 */
export function chatText(value: string): string {
  const flat = value
    // C0/C1 controls, zero-width characters, bidi embeddings/overrides/isolates, BOM.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point: they are dropped.
    .replace(/[\u0000-\u0008\u000e-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  const cut = [...flat];
  const short =
    cut.length > MAX_CHAT_VALUE_CHARS ? `${cut.slice(0, MAX_CHAT_VALUE_CHARS - 1).join('')}…` : flat;
  return short
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/:\/\//g, '\u2236//')
    .replace(/(?<=[\p{L}\p{N}_-])\.(?=\p{L})/gu, '\u2024')
    .replace(/[*~`|[\]@]/g, (c) => INERT[c] ?? c)
    .replace(/_/g, (c, i: number, all: string) =>
      /[\p{L}\p{N}]/u.test(all[i - 1] ?? '') && /[\p{L}\p{N}]/u.test(all[i + 1] ?? '') ? c : (INERT[c] ?? c),
    );
}

/**
 * The share link as `text` carries it: Slack's `<url>` (Mattermost reads it too), only for an
 * http(s) URL without spaces, angle brackets or `|` (the server builds it from --public-url and
 * a base64url id; anything else is no link of ours and is left out).
 */
export function chatLink(url: string): string | null {
  return /^https?:\/\/[^\s<>|]+$/.test(url) ? `<${url}>` : null;
}

export function webhookBody(n: HangNotice, program: string): WebhookBody {
  const who = n.user === null ? `uid ${n.uid}` : chatText(n.user);
  const job = n.slurmJob !== null ? `Slurm job ${chatText(n.slurmJob)}` : chatText(n.jobKey);
  const parts = [
    `MPI job ${job} (${chatText(program)}) of ${who} is hung`,
    n.since === null ? null : `since ${chatText(n.since)}`,
    n.leastProgressed === '' ? null : `least progressed: ranks ${chatText(n.leastProgressed)}`,
    n.diagnosis === '' ? null : chatText(n.diagnosis),
    n.cores === undefined || n.cores.length === 0
      ? null
      : `cores kept in ${n.cores.map(chatText).join(', ')}`,
    n.link === null ? null : chatLink(n.link),
  ].filter((x): x is string => x !== null);
  return { text: parts.join(' · '), mqd: { ...n, program } };
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
