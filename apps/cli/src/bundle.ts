// Build step (`npm run build`, after tsc; never imported by the CLI): `mqd snapshot` as one file.
// A cold `mqd snapshot` loaded ~330 ES modules (the command, @mqd/model with TypeBox, @mqd/mpir,
// @mqd/core) before doing anything: 0.5-0.7 s on the 2-core machine under load, against 0.3 s
// for the same code in one file. esbuild (vite's, in node_modules) bundles the
// command with the workspace packages it uses into dist/snapshot-cmd.bundle.js, which main.ts
// loads when it exists; koffi (native) stays external.
//
// import.meta.url: a module that finds files next to itself (@mqd/core's reader entry and
// native shim) would find them next to the bundle instead. esbuild marks each module's code
// with a `// <path>` line; in each module's code, import.meta.url becomes the URL its original
// file had, relative to the bundle (the layout apps/cli/dist beside packages/*/dist is the
// install's). The count of rewrites must equal the count in the original files, or the build fails.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const DIST = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(DIST, '../../..');
const META = 'import.meta.url';

/** Every bundle the build makes: entry (in dist) -> output (in dist). */
const BUNDLES: readonly (readonly [string, string])[] = [['snapshot-cmd.js', 'snapshot-cmd.bundle.js']];

function esbuildBinary(): string {
  const bin = join(ROOT, 'node_modules', '.bin', 'esbuild');
  if (!existsSync(bin))
    throw new Error(`MQD_E_BUILD: ${bin} is missing: run npm install at ${ROOT} (esbuild comes with vite)`);
  return bin;
}

function occurrences(text: string): number {
  return text.split(META).length - 1;
}

function bundle(entry: string, out: string): void {
  const outFile = join(DIST, out);
  const metaFile = `${outFile}.meta.json`;
  execFileSync(
    esbuildBinary(),
    [
      relative(ROOT, join(DIST, entry)),
      '--bundle',
      '--platform=node',
      '--format=esm',
      '--target=node20',
      '--external:koffi',
      `--metafile=${metaFile}`,
      `--outfile=${outFile}`,
      '--log-level=warning',
    ],
    { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const meta = JSON.parse(readFileSync(metaFile, 'utf8')) as { inputs: Record<string, unknown> };
  unlinkSync(metaFile);
  const expected = new Map<string, number>();
  for (const input of Object.keys(meta.inputs)) {
    const n = occurrences(readFileSync(join(ROOT, input), 'utf8'));
    if (n > 0) expected.set(input, n);
  }
  let current = '';
  const done = new Map<string, number>();
  const lines = readFileSync(outFile, 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const marker = /^\s*\/\/ (\S+\.[cm]?js)$/.exec(line);
    if (marker?.[1] && meta.inputs[marker[1]] !== undefined) current = marker[1];
    if (!line.includes(META)) continue;
    const rel = relative(dirname(outFile), join(ROOT, current)).split(sep).join('/');
    const url = `new URL(${JSON.stringify(rel)}, import.meta.url).href`;
    lines[i] = line.split(META).join(url);
    done.set(current, (done.get(current) ?? 0) + occurrences(line));
  }
  const bad = [...new Set([...expected.keys(), ...done.keys()])].filter(
    (f) => expected.get(f) !== done.get(f),
  );
  if (bad.length > 0)
    throw new Error(
      `MQD_E_BUILD: ${out}: import.meta.url rewritten ${bad.map((f) => `${done.get(f) ?? 0}x in ${f} (source has ${expected.get(f) ?? 0})`).join(', ')}: esbuild's module markers changed; fix apps/cli/src/bundle.ts`,
    );
  writeFileSync(outFile, lines.join('\n'));
}

for (const [entry, out] of BUNDLES) bundle(entry, out);
