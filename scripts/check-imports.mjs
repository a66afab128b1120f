#!/usr/bin/env node
// Import-direction check (Perfetto keeps an allowlist the same way: python/tools/check_imports.py).
// Dependencies point one way: web -> model; server -> core -> model; mpir -> core.
// Each package may import only what its row allows; relative imports may not leave the package;
// browser-safe packages may not import Node built-ins or native modules.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative, resolve } from 'node:path';

const root = resolve(new URL('..', import.meta.url).pathname);
const NODE = 'node:*';
/** package dir -> allowed bare imports (prefix match on the package name) */
const RULES = {
  'packages/model': ['@sinclair/typebox'],
  'apps/web': ['@mqd/model', 'react', 'react-dom', 'd3', 'd3-', 'socket.io-client'],
  'packages/mqd-core': [NODE, '@mqd/model', 'koffi'],
  'packages/mpir': [NODE, '@mqd/model', '@mqd/core'],
  'packages/testkit': [NODE, '@mqd/model'],
  'apps/server': [
    NODE,
    '@mqd/model',
    '@mqd/core',
    '@mqd/mpir',
    'fastify',
    '@fastify/',
    'socket.io',
    'socket.io-client',
    'better-sqlite3',
    // The PostgreSQL store (store-pg.ts, issue 32): node-postgres, pure JS.
    'pg',
    // socket.io between aggregator instances through PostgreSQL (cluster/setup.ts, issue 32).
    '@socket.io/postgres-adapter',
  ],
  'apps/cli': [NODE, '@mqd/model', '@mqd/core', '@mqd/mpir', '@mqd/server'],
  // e2e drives the whole product: it may start the server and the CLI's real seams; axe-core
  // checks each page for accessibility violations (issue 28 item 9).
  e2e: [
    NODE,
    '@mqd/model',
    '@mqd/testkit',
    '@mqd/server',
    '@mqd/cli',
    '@mqd/mpir',
    'playwright-core',
    '@axe-core/playwright',
  ],
};
// Test files may also use the test runner and the testkit.
const TEST_EXTRA = ['vitest', '@mqd/testkit', NODE, 'parse-prometheus-text-format'];

const builtins = new Set(builtinModules);
const IMPORT_RE =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;(])import\s*\(\s*['"]([^'"]+)['"]\s*\)|^\s*import\s+['"]([^'"]+)['"]/gm;

function* files(dir) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return; // a package without this folder has nothing to check
  }
  for (const e of entries) {
    if (e === 'node_modules' || e === 'dist' || e === 'artifacts') continue;
    const p = join(dir, e);
    if (statSync(p).isDirectory()) yield* files(p);
    else if (/\.(ts|tsx|mts|js|mjs)$/.test(e) && !e.endsWith('.d.ts')) yield p;
  }
}

function allowed(spec, rules) {
  const name = spec.startsWith('node:') || builtins.has(spec.split('/')[0]) ? NODE : spec;
  return rules.some((r) =>
    r === NODE
      ? name === NODE
      : name === r || name.startsWith(r.endsWith('-') || r.endsWith('/') ? r : `${r}/`),
  );
}

const problems = [];
for (const [pkg, rules] of Object.entries(RULES)) {
  const pkgDir = join(root, pkg);
  const self = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')).name;
  for (const sub of ['src', 'test', 'bench', '.']) {
    const dir = join(pkgDir, sub);
    const it =
      sub === '.'
        ? [...files(pkgDir)].filter(
            (f) => !/\/(src|test|bench)\//.test(relative(pkgDir, f).replace(/^/, '/')),
          )
        : files(dir);
    for (const f of it) {
      const text = readFileSync(f, 'utf8');
      const isTest = sub !== 'src';
      for (const m of text.matchAll(IMPORT_RE)) {
        const spec = m[1] ?? m[2] ?? m[3];
        if (!spec) continue;
        if (spec.startsWith('.')) {
          const target = resolve(join(f, '..'), spec);
          if (!target.startsWith(`${pkgDir}/`))
            problems.push(`${relative(root, f)}: relative import '${spec}' leaves ${pkg}`);
          continue;
        }
        const ok =
          allowed(spec, [...rules, self]) ||
          (isTest && allowed(spec, TEST_EXTRA)) ||
          (sub === '.' && allowed(spec, ['vite', 'vitest', NODE]));
        if (!ok)
          problems.push(
            `${relative(root, f)}: '${spec}' is not allowed in ${pkg} (allowed: ${rules.join(', ')})`,
          );
      }
    }
  }
}
if (problems.length) {
  console.error(`MQD_E_IMPORT_DIRECTION: ${problems.length} import(s) break the dependency direction:`);
  for (const p of problems) console.error(`  ${p}`);
  console.error('Fix the import, or change the rule in scripts/check-imports.mjs with a reason.');
  process.exit(1);
}
console.log(`imports: ${Object.keys(RULES).length} packages follow the dependency direction`);
