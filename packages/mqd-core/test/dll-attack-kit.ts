// The attacker's files for the DLL-open tests: a FIFO of their own, and a shared object whose
// constructor opens it for reading, so a reader that loads it blocks in open() for good (no
// O_NONBLOCK of ours can reach inside a library's constructor). The constructor first appends
// its pid to `entered`: each reader that got that far, in order.
import { execFileSync } from 'node:child_process';
import { chownSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Attacker, NOBODY } from './security-kit.js';

export interface BlockingDll {
  readonly fifo: string;
  readonly dll: string;
  readonly entered: string;
  /** The pids that ran the constructor so far. */
  enteredPids(): number[];
}

export function buildBlockingDll(a: Attacker): BlockingDll {
  const fifo = join(a.dir, 'dll.fifo');
  const entered = join(a.dir, 'entered');
  const dll = join(a.dir, 'libblocks.so');
  const src = join(a.dir, 'blocks.c');
  execFileSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', 'mkfifo', fifo]);
  writeFileSync(
    src,
    `#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void blocks(void) {
  FILE *f = fopen(${JSON.stringify(entered)}, "a");
  if (f) { fprintf(f, "%d\\n", (int)getpid()); fclose(f); }
  open(${JSON.stringify(fifo)}, O_RDONLY); /* no writer ever comes */
}
`,
  );
  execFileSync('cc', ['-shared', '-fPIC', '-o', dll, src], { stdio: 'pipe' });
  chownSync(dll, NOBODY, NOBODY);
  return {
    fifo,
    dll,
    entered,
    enteredPids() {
      try {
        return readFileSync(entered, 'utf8').split('\n').filter(Boolean).map(Number);
      } catch {
        return [];
      }
    },
  };
}
