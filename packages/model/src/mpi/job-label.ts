// What a job is called: the program the starter runs, not the starter's own command line
// ("mpirun -np 4 --mca btl self,vader ./wrong_tag 3" reads "wrong_tag 3"). The dashboard's jobs
// table and Fleet view, and the hang watch's fleet and notifications, name jobs with it. Pure.

/** Starters (by basename) whose options come before the program. */
const LAUNCHERS = new Set([
  'mpirun',
  'mpiexec',
  'mpiexec.hydra',
  'orterun',
  'prterun',
  'prun',
  'srun',
  'aprun',
]);

/** Options of those starters that take a value (two for the -mca / -genv pairs). */
const WITH_VALUE: Readonly<Record<string, number>> = Object.fromEntries([
  ...[
    '-n',
    '-np',
    '-c',
    '-N',
    '-H',
    '-host',
    '--host',
    '-hosts',
    '-hostfile',
    '--hostfile',
    '-machinefile',
    '--machinefile',
    '-f',
    '-ppn',
    '-npernode',
    '--npernode',
    '--map-by',
    '-map-by',
    '--bind-to',
    '-bind-to',
    '--rank-by',
    '-x',
    '-wdir',
    '--wdir',
    '-wd',
    '-iface',
    '-launcher',
    '-bootstrap',
    '-env',
    '--prefix',
    '-prefix',
    '-p',
    '--partition',
    '-t',
    '--time',
    '-J',
    '--job-name',
    '-A',
    '--account',
    '--ntasks',
    '--nodes',
    '--ntasks-per-node',
    '--cpus-per-task',
  ].map((o) => [o, 1] as const),
  ...['-mca', '--mca', '-gmca', '--gmca', '-genv', '-genvlist'].map((o) => [o, 2] as const),
]);

export interface JobLabel {
  /** Slurm's job id when the job was attached as a Slurm job, else null. */
  readonly slurmJob: string | null;
  /** The program's file name ("wrong_tag"), or the command's first word when no program is found. */
  readonly program: string;
  /** Its arguments, as one string ("" when none). */
  readonly args: string;
  /** The starter ("mpirun"), "" when the command is the program itself. */
  readonly launcher: string;
}

const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1);

/** How the agent names a Slurm job: "Slurm job 1234 (name) command" (apps/cli real-locator). */
const SLURM_COMMAND = /^Slurm job (\S+) \((.*?)\)\s*(.*)$/;

export function jobLabel(command: string): JobLabel {
  const slurm = SLURM_COMMAND.exec(command.trim());
  if (slurm) {
    // Slurm's job name first; the batch script or the first task when the name is empty.
    const rest = jobLabel(slurm[3] ?? '');
    const name = slurm[2] ?? '';
    return name === ''
      ? { ...rest, slurmJob: slurm[1] ?? null }
      : { program: name, args: '', launcher: '', slurmJob: slurm[1] ?? null };
  }
  const words = command
    .trim()
    .split(/\s+/)
    .filter((w) => w !== '');
  const first = words[0] ?? '';
  if (!LAUNCHERS.has(baseName(first))) {
    return { program: baseName(first), args: words.slice(1).join(' '), launcher: '', slurmJob: null };
  }
  let i = 1;
  while (i < words.length) {
    const w = words[i] ?? '';
    if (w === '--') {
      i++;
      break;
    }
    if (!w.startsWith('-')) break;
    // "--opt=value" carries its value; "-np 4" takes the next word.
    i += 1 + (w.includes('=') ? 0 : (WITH_VALUE[w] ?? 0));
  }
  const program = words[i];
  if (program === undefined)
    return { program: baseName(first), args: words.slice(1).join(' '), launcher: '', slurmJob: null };
  return {
    program: baseName(program),
    args: words.slice(i + 1).join(' '),
    launcher: baseName(first),
    slurmJob: null,
  };
}
