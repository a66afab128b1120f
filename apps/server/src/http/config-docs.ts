// The settings table of docs/configuration.md, made from SETTINGS (settings.ts) and kept true by
// `node scripts/config-table.mjs` and its test.
import { MIN_CLUSTER_SECRET_CHARS } from '../cluster/seal.js';
import { type Kind, LOG_LEVELS, SETTINGS, type Setting } from './settings.js';

/** What each kind of setting takes, as the docs' table says it. */
const KIND_TAKES: Record<Kind, string> = {
  int: 'whole number',
  string: 'text',
  token: 'secret, 16+ characters',
  tokenFile: 'file, mode 600, 16+ characters',
  clusterSecretFile: `file, mode 600, ${MIN_CLUSTER_SECRET_CHARS}+ characters`,
  header: 'header name',
  list: 'addresses or CIDR blocks',
  bool: 'a switch (the variable: 1, true, yes or 0, false, no)',
  dirs: 'absolute directories',
  level: LOG_LEVELS.join(', '),
  onoff: 'on or off',
  names: 'names',
  urls: 'http(s) URLs',
  store: 'postgres:// URL, sqlite: or a directory',
};

function shownDefault(s: Setting): string {
  const v = s.default;
  if (s.shown !== undefined) return s.shown;
  if (v === null || (Array.isArray(v) && v.length === 0)) return 'none';
  if (typeof v === 'boolean') return s.kind === 'onoff' ? (v ? 'on' : 'off') : String(v);
  return `\`${Array.isArray(v) ? v.join(',') : String(v)}\``;
}

/** The rows of the settings table in docs/configuration.md: one per flag. */
export function configTableRows(): string[][] {
  const code = (x: string) => `\`${x}\``;
  return [
    ['setting', 'flag', 'variable', 'takes', 'default', 'meaning'],
    ...SETTINGS.map((s: Setting) => [
      s.key,
      code(`--${s.flag}`),
      code(s.env),
      s.kind === 'int'
        ? `${KIND_TAKES.int} in [${s.min ?? 0}, ${s.max ?? Number.MAX_SAFE_INTEGER}]`
        : KIND_TAKES[s.kind],
      shownDefault(s),
      s.help.replaceAll('|', '\\|'),
    ]),
  ];
}

/** The settings table as Markdown, its columns padded. */
export function configTable(): string {
  const rows = configTableRows();
  const width = (rows[0] ?? []).map((_, i) => Math.max(3, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) => `| ${r.map((c, i) => c.padEnd(width[i] ?? 0)).join(' | ')} |`;
  const [head = [], ...body] = rows;
  return [line(head), line(width.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

/** The marks around the generated table in docs/configuration.md. */
export const CONFIG_TABLE_BEGIN =
  '<!-- settings: made by `node scripts/config-table.mjs` from apps/server/src/http/settings.ts -->';
export const CONFIG_TABLE_END = '<!-- end of settings -->';

/** `markdown` with the text between the marks replaced by the table; null when a mark is missing. */
export function withConfigTable(markdown: string): string | null {
  const begin = markdown.indexOf(CONFIG_TABLE_BEGIN);
  const end = markdown.indexOf(CONFIG_TABLE_END);
  if (begin < 0 || end < begin) return null;
  return `${markdown.slice(0, begin + CONFIG_TABLE_BEGIN.length)}\n\n${configTable()}\n\n${markdown.slice(end)}`;
}
