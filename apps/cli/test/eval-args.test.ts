// Which expressions `mqd snapshot` reads: --eval and the one --progress counter in the order
// given, each with the --frame after it (src/eval-args.ts).
import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { evalsFromTokens } from '../src/eval-args.js';

const tokensOf = (args: string[]) =>
  parseArgs({
    args,
    options: {
      eval: { type: 'string', multiple: true },
      progress: { type: 'string', multiple: true },
      frame: { type: 'string', multiple: true },
    },
    tokens: true,
  }).tokens;

describe('--eval EXPR and --progress EXPR, each with its --frame', () => {
  it('marks the --progress expression, in the order given, with the frame after it', () => {
    expect(
      evalsFromTokens(tokensOf(['--eval', 'x', '--progress', 'iter', '--frame', 'solve', '--eval', 'y'])),
    ).toEqual([{ expr: 'x' }, { expr: 'iter', frame: 'solve', progress: true }, { expr: 'y' }]);
    expect(evalsFromTokens(tokensOf(['--progress', 'step_counter']))).toEqual([
      { expr: 'step_counter', progress: true },
    ]);
  });
  it('refuses a second counter, a --frame with nothing before it, and too many expressions', () => {
    expect(evalsFromTokens(tokensOf(['--progress', 'a', '--progress', 'b']))).toMatchObject({
      code: 'MQD_E_USAGE',
    });
    expect(evalsFromTokens(tokensOf(['--frame', 'solve', '--progress', 'a']))).toMatchObject({
      code: 'MQD_E_USAGE',
    });
    expect(
      evalsFromTokens(
        tokensOf(['--progress', 'p', ...Array.from({ length: 16 }, (_, i) => ['--eval', `v${i}`]).flat()]),
      ),
    ).toMatchObject({ code: 'MQD_E_USAGE', message: expect.stringContaining('not 17') });
  });
});
