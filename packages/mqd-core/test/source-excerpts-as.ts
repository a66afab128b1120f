// Run by source-excerpts.test.ts under setpriv as a real unprivileged user: the excerpt of
// line 20 of each file given, as that user reads them, printed as JSON.
import {
  excerptFromLines,
  readSourceFile,
  SOURCE_LIMITS,
  splitLines,
} from '../src/reader/source-excerpts.js';

const uid = process.geteuid?.() ?? -1;
const out = process.argv.slice(2).map((file) => {
  const r = readSourceFile(file, SOURCE_LIMITS.maxFileBytes, uid);
  return r.ok ? excerptFromLines(file, 20, splitLines(r.value)) : { file, line: 20, unreadable: r.error };
});
process.stdout.write(JSON.stringify(out));
