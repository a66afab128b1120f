// The `counters` request (the hang watch): the /proc counters of ranks, read by the discovery
// seam without stopping anything; every asked rank answered once, in ranks or in errors.
import { mqdError } from '@mqd/model';
import type { CountersResult } from '../../protocol/agent-protocol.js';
import type { CounterError, CountersParams } from '../../shared/seams.js';
import { type AgentContext, refuse, whileActive, wireErrorOf } from '../context.js';

export function handleCounters(ctx: AgentContext, id: number, p: CountersParams): Promise<void> {
  return whileActive(ctx, id, async () => {
    try {
      const d = ctx.opts.discovery;
      if (!d) {
        refuse(
          ctx,
          id,
          'counters',
          mqdError(
            'MQD_E_AGENT_MISSING',
            `the agent on ${ctx.host} runs without job discovery (the hang watch), so it reads no counters`,
          ),
        );
        return;
      }
      const got = await d.counters(p);
      const asked = new Set(p.ranks.map((r) => r.rank));
      const ranks = got.ranks.filter((r) => asked.delete(r.rank));
      const errors: CounterError[] = got.errors
        .filter((e) => asked.delete(e.rank))
        .map((e) => ({ rank: e.rank, error: wireErrorOf(e.error) }));
      for (const rank of asked) {
        errors.push({
          rank,
          error: mqdError('MQD_E_INTERNAL', `the counter reader gave nothing for rank ${rank}`),
        });
      }
      const result: CountersResult = {
        ranks,
        errors,
        clockTicksPerSecond: got.clockTicksPerSecond,
        at: Date.now(),
      };
      ctx.send({ type: 'reply', id, method: 'counters', ok: true, result });
    } catch (e) {
      refuse(ctx, id, 'counters', ctx.failed(e));
    }
  });
}
