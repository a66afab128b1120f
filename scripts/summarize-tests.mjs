#!/usr/bin/env node
// Sums the JSON reports of the test runners (vitest, and the e2e runner) into the one closing
// line CI reads: "N passed, N failed". Exit 1 when anything failed or nothing ran.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2] ?? '.test-results';
let passed = 0;
let failed = 0;
let skipped = 0;
const failures = [];
if (existsSync(dir)) {
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.json'))) {
    const r = JSON.parse(readFileSync(join(dir, f), 'utf8'));
    // vitest / jest-style report
    for (const file of r.testResults ?? []) {
      for (const t of file.assertionResults ?? []) {
        if (t.status === 'passed') passed++;
        else if (t.status === 'failed') {
          failed++;
          failures.push(`${file.name}: ${t.fullName}`);
        } else skipped++;
      }
      // a file that failed to load has no assertions but a failure message
      if ((file.assertionResults ?? []).length === 0 && file.status === 'failed') {
        failed++;
        failures.push(`${file.name}: ${String(file.message).split('\n')[0]}`);
      }
    }
  }
}
for (const f of failures) console.log(`FAILED ${f}`);
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
