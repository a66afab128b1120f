// The model is browser-safe and type-checks without Node's types (tsconfig "types": []). Its
// tests that read the recorded snapshots in fixtures/golden need one Node function and the
// test file's directory, declared here as Node defines them.
declare module 'node:fs' {
  export function readFileSync(path: string, encoding: 'utf8'): string;
}

interface ImportMeta {
  /** Directory of the current module (Node >= 20.11, and vitest). */
  readonly dirname: string;
}
