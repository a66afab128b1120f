// The Slurm parts that are pure text: job ids, `scontrol listpids` rows and the singleton
// warning. The rows are real output of Debian's Slurm 22.05 for a job whose ranks srun started
// (`srun --mpi=pmi2` in the batch script: the batch step's shell and two sruns, the tasks in
// step 0); the live behaviour is apps/cli/test/slurm-srun.mpi.test.ts.
import { describe, expect, it } from 'vitest';
import { parseSlurmJob, singletonWarning, slurmLocalPids } from '../src/slurm.js';

const LISTPIDS_SRUN_JOB = `PID      JOBID    STEPID   LOCALID GLOBALID
20244    82996    0        0       0       
20245    82996    0        1       1       
20246    82996    0        2       2       
20247    82996    0        3       3       
20218    82996    batch    0       0       
20230    82996    batch    -       -       
20221    82996    batch    -       -       
`;

describe('parseSlurmJob', () => {
  it('takes JOBID and JOBID.STEP, and refuses anything else with a usage error', () => {
    expect(parseSlurmJob('82996')).toEqual({ ok: true, value: { jobId: 82996, step: null } });
    expect(parseSlurmJob(' 82996.0 ')).toEqual({ ok: true, value: { jobId: 82996, step: '0' } });
    expect(parseSlurmJob('82996.batch')).toEqual({ ok: true, value: { jobId: 82996, step: 'batch' } });
    const bad = parseSlurmJob('82996;ls');
    expect(bad.ok ? 'ok' : bad.error.code).toBe('MQD_E_USAGE');
  });
});

describe('slurmLocalPids', () => {
  it("reads every row of an srun-started job: step 0's tasks and the batch step", () => {
    const asked: string[][] = [];
    const rows = slurmLocalPids({ jobId: 82996, step: null }, (cmd, args) => {
      asked.push([cmd, ...args]);
      return LISTPIDS_SRUN_JOB;
    });
    expect(asked).toEqual([['scontrol', 'listpids', '82996']]);
    expect(rows.ok ? rows.value : rows.error.message).toEqual([
      { pid: 20244, step: '0' },
      { pid: 20245, step: '0' },
      { pid: 20246, step: '0' },
      { pid: 20247, step: '0' },
      { pid: 20218, step: 'batch' },
      { pid: 20230, step: 'batch' },
      { pid: 20221, step: 'batch' },
    ]);
  });

  it('asks for the step it is given and keeps only rows of the job', () => {
    const asked: string[][] = [];
    const rows = slurmLocalPids({ jobId: 1, step: '0' }, (cmd, args) => {
      asked.push([cmd, ...args]);
      return LISTPIDS_SRUN_JOB;
    });
    expect(asked).toEqual([['scontrol', 'listpids', '1.0']]);
    expect(rows.ok ? rows.value : rows.error.message).toEqual([]);
  });
});

describe('singletonWarning', () => {
  it('is null when every rank came from its MPI, and names the SLURM_PROCID-only pids', () => {
    expect(singletonWarning([])).toBeNull();
    expect(singletonWarning([11, 12])).toMatch(
      /^2 process\(es\) \(pid 11, 12\) name their rank only in SLURM_PROCID .*singleton.*MPICH: pmi2, Open MPI: pmix\)$/,
    );
    // A big job's warning stays short.
    const many = Array.from({ length: 100 }, (_, i) => 1000 + i);
    expect(singletonWarning(many)).toMatch(/^100 process\(es\) \(pid 1000, 1001, .*, 1007, \.\.\.\)/);
  });
});
