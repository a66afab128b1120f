// Which process `mqd snapshot ARGS` reads first, read from its arguments without loading the
// command: main.ts starts the reader for that process's owner (@mqd/core/reader-spawn) while the
// command's code loads, so the two node starts of a cold `mqd snapshot` overlap. A
// guess only: the command parses its arguments itself, and a reader started for nothing is
// killed at exit. Core files and Slurm jobs name no pid here: their reader starts as before.

const NO_EARLY_READER = new Set(['--help', '-h', '--core', '--cores', '--slurm']);

/** The pid of the first `--pid PID[:RANK]` or `--attach PID`, or null. */
export function firstTargetPid(argv: readonly string[]): number | null {
  let pid: number | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    const [flag = '', inline] = a.startsWith('--') && a.includes('=') ? a.split(/=(.*)/s) : [a, undefined];
    if (NO_EARLY_READER.has(flag)) return null;
    if (pid !== null || (flag !== '--pid' && flag !== '--attach')) continue;
    const value = inline ?? argv[i + 1] ?? '';
    const m = /^([1-9]\d{0,9})(?::\d+)?$/.exec(value);
    if (m?.[1]) pid = Number(m[1]);
  }
  return pid;
}
