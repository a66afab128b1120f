#!/usr/bin/env node
// Regenerates the settings table of docs/configuration.md from the one settings table,
// apps/server/src/http/settings.ts SETTINGS (the rest of the page is left as it is).
//   node scripts/config-table.mjs           rewrite the table
//   node scripts/config-table.mjs --check   exit 1 when the page's table differs
// The unit test apps/server/test/config-table.test.ts fails when they differ.
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
if (!process.execArgv.includes('tsx')) {
  // config-docs.ts is TypeScript: run again with tsx, resolving the workspace's packages to their sources.
  const r = spawnSync(
    process.execPath,
    ['--conditions=source', '--import', 'tsx', self, ...process.argv.slice(2)],
    { stdio: 'inherit' },
  );
  process.exit(r.status ?? 1);
}

const { withConfigTable, CONFIG_TABLE_BEGIN, CONFIG_TABLE_END } = await import(
  new URL('../apps/server/src/http/config-docs.ts', import.meta.url).href
);
const page = new URL('../docs/configuration.md', import.meta.url);
const before = readFileSync(page, 'utf8');
const after = withConfigTable(before);
if (after === null) {
  console.error(
    `MQD_E_USAGE: docs/configuration.md lacks the marks ${CONFIG_TABLE_BEGIN} and ${CONFIG_TABLE_END}`,
  );
  process.exit(2);
}
if (process.argv.includes('--check')) {
  if (after !== before) {
    console.error(
      'docs/configuration.md: the settings table differs from settings.ts; run node scripts/config-table.mjs',
    );
    process.exit(1);
  }
  console.log('docs/configuration.md: the settings table matches config.ts');
} else {
  writeFileSync(page, after);
  console.log(
    after === before ? 'docs/configuration.md: unchanged' : 'docs/configuration.md: settings table rewritten',
  );
}
