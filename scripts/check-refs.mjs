#!/usr/bin/env node
// Comments and docs cite files that exist. Finds repository paths named in source comments and
// in Markdown (`packages/x/src/y.ts`, `docs/z.md`, `fixtures/mpi/README.md`, ...) and fails
// on any that is not in the checkout, so a renamed or deleted file cannot leave a false pointer.
// In source files (ts, tsx, mjs, js, c, h, sh) a comment that names a file by a shorter path
// (`mqs/shim.ts`) or by its name alone (`core-args.ts`, `agent.js` for agent.ts) must name a
// file that exists somewhere in the checkout too, unless it is another project's (EXTERNAL).
// Paths outside the repository (../shared/...) may not be cited: copy the fact instead.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

const root = resolve(new URL('..', import.meta.url).pathname);
const TOP = ['apps', 'packages', 'scripts', 'fixtures', 'e2e', 'docs', 'bench', '.ci'];
const SKIP = new Set(['node_modules', 'dist', 'build', 'artifacts', 'results', 'golden', '.turbo']);
const EXT = /\.(ts|tsx|mjs|js|c|cpp|h|sh|md)$/;
// A repository path: starts at a top-level folder (or is a root file) and ends in an extension.
const PATH_RE =
  /(?<![\w./-])((?:apps|packages|scripts|fixtures|e2e|docs|bench)\/[\w.@-]+(?:\/[\w.@<>*-]+)*\.(?:ts|tsx|mjs|js|c|cpp|h|sh|md|json|css|html))\b/g;
const OUTSIDE_RE = /\.\.\/shared\/|(?<![\w-])shared\/reference\//g;

function* walk(dir) {
  for (const e of readdirSync(dir)) {
    if (SKIP.has(e)) continue;
    const p = join(dir, e);
    if (statSync(p).isDirectory()) yield* walk(p);
    else if (EXT.test(e)) yield p;
  }
}

const files = [...TOP.flatMap((t) => (existsSync(join(root, t)) ? [...walk(join(root, t))] : []))];

// Every file of the checkout (any extension), for names cited without their folder.
function* walkAll(dir) {
  for (const e of readdirSync(dir)) {
    if (SKIP.has(e) || e === '.git') continue;
    const p = join(dir, e);
    if (statSync(p).isDirectory()) yield* walkAll(p);
    else yield relative(root, p);
  }
}
const allPaths = [...walkAll(root)];
const allNames = new Set(allPaths.map((p) => p.slice(p.lastIndexOf('/') + 1)));
// A file a comment names without a top-level folder (`foo/bar.ts`, `bar-baz.ts`, `bar.js` for
// bar.ts as ESM imports spell it), in a source file. URLs, absolute paths (/proc/...), <headers>,
// npm package paths (@scope/x, node_modules) and build output are not the repository's files.
const NAME_RE =
  /(?<![\w./@<:-])((?:[\w.-]+\/)*[A-Za-z_][\w-]*(?:\.[\w-]+)*\.(?:ts|tsx|mjs|js|sh|c|h))(?![\w/-]|\.\w)/g;
const SOURCE = /\.(ts|tsx|mjs|js|c|cpp|h|sh)$/;
// Files of other projects that comments here name on purpose (where a fact comes from): never
// one of this checkout, so not checked. Anything else a comment names must exist here.
const EXTERNAL = [
  // MPICH's source tree (src/mpi/..., src/mpid/...) and files of it cited by name.
  /^src\/mpid?\//,
  /^(dll_mpich\.c|dbginit\.c|debugger\.c|mpidpre\.h|mpid_nem_queue\.h|mpl_atomic_c11\.h)$/,
  // Open MPI and ORTE (ompi/..., orte/...) and files of them cited by name.
  /^(ompi|orte)\//,
  /^(communicator\/communicator\.h|ompi_common_dll\.c|ompi_debuggers\.c|orted_mpir_breakpoint\.c)$/,
  /^(ompi_msgq_dll\.c|request_dbg\.h|wait_sync\.h|mca\/pml\/base\/pml_base_request\.h)$/,
  // UCX's source tree (src/ucp/..., src/ucs/...) and files of it or of Open MPI's UCX PML cited by name.
  /^src\/(ucp|ucs|uct)\//,
  /^(tag_match\.c|pml_ucx_request\.h)$/,
  // The standards' and runtimes' headers: Fortran MPI, PMIx, OpenMP and OMPD.
  /^(mpi\.h|mpif\.h|pmix_common\.h|omp\.h|omp-tools\.h|ompd-types\.h)$/,
  // CPython's headers, where the interpreter's structures are declared.
  /^(Include\/internal\/)?pycore_[a-z_]+\.h$/,
  /^cpython\/[a-z_]+\.h$/,
  // A user's program in the diagnosis' example sentences (a.c:31): one letter, no such file.
  /^[a-z]\.c$/,
  // The house style's models (Perfetto's ui/src/..., fastify's lib/...).
  /^ui\/src\//,
  /^lib\/errors\.js$/,
];
const TS_OF = { js: ['ts', 'tsx', 'js'], mjs: ['mts', 'mjs'] };
function namedFileExists(name, file) {
  if (EXTERNAL.some((re) => re.test(name))) return true;
  const dot = name.lastIndexOf('.');
  const stem = name.slice(0, dot);
  const ext = name.slice(dot + 1);
  const spellings = (TS_OF[ext] ?? [ext]).map((e) => `${stem}.${e}`);
  for (const n of spellings) {
    if (existsSync(join(file, '..', n)) || existsSync(join(root, n))) return true;
    if (!n.includes('/')) {
      if (allNames.has(n)) return true;
    } else if (allPaths.some((p) => p.endsWith(`/${n}`))) return true;
  }
  return false;
}
for (const f of ['README.md', 'SECURITY.md']) if (existsSync(join(root, f))) files.push(join(root, f));

const bad = [];
for (const file of files) {
  const rel = relative(root, file);
  if (rel === 'scripts/check-refs.mjs') continue;
  const lines = readFileSync(file, 'utf8').split('\n');
  lines.forEach((line, i) => {
    // In code files only comments count (a string may name a path on purpose, e.g. a test's input).
    const isDoc = rel.endsWith('.md');
    const text = isDoc ? line : (/(\/\/|\/\*|^\s*\*|^\s*#)(.*)$/.exec(line)?.[2] ?? '');
    for (const m of text.matchAll(PATH_RE)) {
      const p = m[1];
      if (p.includes('*') || p.includes('<')) continue; // a pattern, not a file
      if (/(^|\/)(dist|build)\//.test(p)) continue; // build output: exists after a build only
      if (existsSync(join(root, p)) || existsSync(join(file, '..', p))) continue;
      bad.push(`${rel}:${i + 1}: cites ${p}, which does not exist`);
    }
    if (!isDoc && SOURCE.test(rel)) {
      // Without the URLs in it: a URL's path is another site's.
      const bare = text.replace(/[a-z][\w+.-]*:\/\/\S*/gi, ' ');
      for (const m of bare.matchAll(NAME_RE)) {
        const n = m[1];
        if (PATH_RE.test(n)) continue; // a repository path: checked above
        PATH_RE.lastIndex = 0;
        if (/(^|\/)(dist|build|node_modules)\//.test(n)) continue;
        if (namedFileExists(n, file)) continue;
        bad.push(`${rel}:${i + 1}: names ${n}, which is no file of the repository`);
      }
    }
    for (const _ of text.matchAll(OUTSIDE_RE)) {
      bad.push(
        `${rel}:${i + 1}: cites a file outside the repository; put the fact in the package README instead`,
      );
    }
  });
}
// Error hints name only settings that exist: each MQD_* variable and --flag a hint tells the
// user to set must appear in the code that reads it (apps/cli, apps/server, packages/*/src).
const hintsFile = join(root, 'packages/model/src/errors.ts');
const hints = readFileSync(hintsFile, 'utf8');
const code = files
  .filter((f) => /\/src\/.*\.tsx?$/.test(f) && f !== hintsFile)
  .map((f) => readFileSync(f, 'utf8'))
  .join('\n');
for (const v of new Set(hints.match(/\bMQD_(?!E_)[A-Z_]+\b/g) ?? [])) {
  if (!code.includes(v)) bad.push(`packages/model/src/errors.ts: a hint names ${v}, which nothing reads`);
}
for (const f of new Set(hints.match(/(?<![\w-])--[a-z][a-z-]+/g) ?? [])) {
  if (f === '--enable-debuginfo') continue; // MPICH's configure option, not ours
  if (!code.includes(`'${f.slice(2)}'`) && !code.includes(f)) {
    bad.push(`packages/model/src/errors.ts: a hint names ${f}, which no command accepts`);
  }
}
if (bad.length > 0) {
  console.error(bad.join('\n'));
  console.error(`MQD_E_BAD_REFERENCE: ${bad.length} reference(s) to files that are not in the repository`);
  process.exit(1);
}
console.log(
  `references: ${files.length} files checked, every cited path and every setting a hint names exists`,
);
