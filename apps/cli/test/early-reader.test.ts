// Which pid `mqd snapshot` starts its reader for before it loads the command (main.ts).
import { describe, expect, it } from 'vitest';
import { firstTargetPid } from '../src/early-reader.js';

describe('firstTargetPid', () => {
  it('takes the first --pid or --attach, in either spelling', () => {
    expect(firstTargetPid(['--pid', '123:0', '--pid', '124:1'])).toBe(123);
    expect(firstTargetPid(['--json', '--pid=77'])).toBe(77);
    expect(firstTargetPid(['--attach', '555', '--stacks'])).toBe(555);
    expect(firstTargetPid(['--dll', '/x/libompitv.so', '--attach=9'])).toBe(9);
  });

  it('starts nothing for cores, Slurm jobs, help or a value that is no pid', () => {
    expect(firstTargetPid(['--core', 'rank-0.core', '--pid', '5'])).toBeNull();
    expect(firstTargetPid(['--pid', '5', '--cores', 'dir'])).toBeNull();
    expect(firstTargetPid(['--slurm=12.0'])).toBeNull();
    expect(firstTargetPid(['--pid', '5', '-h'])).toBeNull();
    expect(firstTargetPid(['--pid', 'abc'])).toBeNull();
    expect(firstTargetPid(['--pid', '0'])).toBeNull();
    expect(firstTargetPid(['--pid', '-1'])).toBeNull();
    expect(firstTargetPid(['--pid'])).toBeNull();
    expect(firstTargetPid([])).toBeNull();
  });
});
