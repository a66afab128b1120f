#!/usr/bin/env node
// Import-direction check (Perfetto keeps an allowlist the same way: python/tools/check_imports.py).
// Dependencies point one way: web -> model; server -> core -> model; mpir -> core.
// Each package may import only what its row allows; relative imports may not leave the package;
// browser-safe packages may not import Node built-ins or native modules. Inside apps/server/src
// each room may import only the rooms its row names (SERVER_ROOMS), and the agent's side never
// reaches the aggregator's rooms or packages.
// Usage: node scripts/check-imports.mjs [ROOT]   (ROOT: a copy of the checkout; default this one)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative, resolve, sep } from 'node:path';

const root = resolve(process.argv[2] ?? new URL('..', import.meta.url).pathname);
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
    // The PostgreSQL store (store/dialect-pg.ts): node-postgres, pure JS.
    'pg',
    // socket.io between aggregator instances through PostgreSQL (cluster/setup.ts).
    '@socket.io/postgres-adapter',
  ],
  'apps/cli': [NODE, '@mqd/model', '@mqd/core', '@mqd/mpir', '@mqd/server'],
  // e2e drives the whole product: it may start the server and the CLI's real seams; axe-core
  // checks each page for accessibility violations.
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
// The rooms of apps/server/src, lowest first, each with the rooms it may import besides itself.
// The agent's side (shared, protocol, agent, synthetic) is what a compute node runs: it never
// imports the aggregator's rooms. The aggregator is layered: store under auth, both under
// fanout, hub under fanout/cluster/watch, http (the Fastify app, its plugins, config, serve) on
// top. A new folder under src needs a row here.
const SERVER_SRC = 'apps/server/src';
const SERVER_ROOMS = {
  shared: [],
  protocol: ['shared'],
  agent: ['shared', 'protocol'],
  synthetic: ['shared', 'protocol', 'agent'],
  store: ['shared'],
  auth: ['shared', 'store'],
  hub: ['shared', 'protocol'],
  fanout: ['shared', 'protocol', 'store', 'auth', 'hub'],
  cluster: ['shared', 'protocol', 'store', 'hub'],
  watch: ['shared', 'protocol', 'store', 'auth', 'hub', 'fanout'],
  http: ['shared', 'protocol', 'agent', 'store', 'auth', 'hub', 'fanout', 'cluster', 'watch'],
};
/** The entries at the top of src (package.json "exports"): '*' may import every room. */
const SERVER_ENTRIES = {
  'index.ts': '*',
  'agent-entry.ts': ['shared', 'protocol', 'agent'],
};
/** Rooms (and entries) a compute node loads: none of the aggregator's packages either. */
const AGENT_SIDE = new Set(['shared', 'protocol', 'agent', 'synthetic', 'agent-entry.ts']);
const AGGREGATOR_PACKAGES = ['fastify', '@fastify/', 'socket.io', '@socket.io/', 'better-sqlite3', 'pg'];

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

/** The room of a file under apps/server/src: its first folder, or the entry's file name. */
function serverRoom(file) {
  return relative(join(root, SERVER_SRC), file).split(sep)[0] ?? '';
}

/** Problems of one import of a file under apps/server/src, by the room rules. */
function serverRoomProblems(file, spec) {
  const from = serverRoom(file);
  const where = relative(root, file);
  const isEntry = from in SERVER_ENTRIES;
  const mayImport = isEntry ? SERVER_ENTRIES[from] : SERVER_ROOMS[from];
  if (mayImport === undefined)
    return [
      `${where}: '${from}' is no room of apps/server/src: add it to SERVER_ROOMS (with the rooms it may import) or move the file into a room`,
    ];
  const out = [];
  if (!spec.startsWith('.')) {
    if (AGENT_SIDE.has(from) && allowed(spec, AGGREGATOR_PACKAGES))
      out.push(
        `${where}: '${spec}' is the aggregator's; the agent's side (agent-entry.ts, ${[...AGENT_SIDE].filter((r) => r in SERVER_ROOMS).join('/, ')}/) never imports ${AGGREGATOR_PACKAGES.join(', ')}`,
      );
    return out;
  }
  const target = resolve(join(file, '..'), spec);
  if (!target.startsWith(`${join(root, SERVER_SRC)}/`)) return out;
  const to = serverRoom(target);
  if (to === from && !isEntry) return out;
  if (to in SERVER_ENTRIES)
    return [`${where}: '${spec}' imports the entry ${to}; import the room's file itself`];
  if (mayImport === '*' || mayImport.includes(to)) return out;
  const side =
    AGENT_SIDE.has(from) && !AGENT_SIDE.has(to) ? " (the agent's side never imports the aggregator)" : '';
  out.push(
    `${where}: '${spec}' is in the ${to} room, which ${isEntry ? from : `the ${from} room`} may not import${side}; it may import only: ${mayImport.length ? mayImport.join(', ') : 'no other room'}`,
  );
  return out;
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
      const inServerSrc = f.startsWith(`${join(root, SERVER_SRC)}/`);
      for (const m of text.matchAll(IMPORT_RE)) {
        const spec = m[1] ?? m[2] ?? m[3];
        if (!spec) continue;
        if (inServerSrc) problems.push(...serverRoomProblems(f, spec));
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
console.log(
  `imports: ${Object.keys(RULES).length} packages follow the dependency direction; apps/server's ${Object.keys(SERVER_ROOMS).length} rooms follow theirs`,
);
