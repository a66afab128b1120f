// Which expressions `mqd snapshot` reads on every rank: each `--eval EXPR`, and at most one
// `--progress EXPR`, the progress counter (read like --eval; the diagnosis's least-progressed
// ranks are those with its smallest number), each with the `--frame FUNC` that follows it.
import { type EvalRequest, MAX_EVAL_EXPRESSIONS, mqdError } from '@mqd/model';

/** A parsed option as parseArgs' tokens give it. */
export interface OptionToken {
  readonly kind: string;
  readonly name?: string;
  readonly value?: string | undefined;
}

/** The evals in the order given (the n-th value of each rank is the n-th), or a usage error. */
export function evalsFromTokens(tokens: readonly OptionToken[]): EvalRequest[] | ReturnType<typeof mqdError> {
  const out: { expr: string; frame?: string; progress?: true }[] = [];
  let counters = 0;
  for (const t of tokens) {
    if (t.kind !== 'option' || t.value === undefined) continue;
    if (t.name === 'eval') out.push({ expr: t.value });
    else if (t.name === 'progress') {
      counters++;
      if (counters > 1) {
        return mqdError(
          'MQD_E_USAGE',
          `--progress ${t.value}: one progress counter per snapshot; read the others with --eval`,
        );
      }
      out.push({ expr: t.value, progress: true });
    } else if (t.name === 'frame') {
      const last = out[out.length - 1];
      if (last === undefined || last.frame !== undefined) {
        return mqdError(
          'MQD_E_USAGE',
          `--frame ${t.value} names the frame of the --eval or --progress before it: give --eval EXPR first`,
        );
      }
      last.frame = t.value;
    }
  }
  if (out.length > MAX_EVAL_EXPRESSIONS) {
    return mqdError(
      'MQD_E_USAGE',
      `at most ${MAX_EVAL_EXPRESSIONS} --eval and --progress expressions per snapshot, not ${out.length}`,
    );
  }
  return out;
}
