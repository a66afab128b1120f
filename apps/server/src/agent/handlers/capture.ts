// The `capture` request (the hang watch, policy captureCores): cores of a hung job's ranks,
// written by the reader's capture into `<first core dir>/<name>`, as the ranks' owner; the
// directory is this agent's choice (the request names only one path component), so no request
// points it elsewhere.
import { join } from 'node:path';
import { MqdException, mqdError } from '@mqd/model';
import { CAPTURE_NAME_RE, type CaptureParams } from '../../protocol/agent-protocol.js';
import { type AgentContext, refuse, whileActive, wireErrorOf } from '../context.js';
import { resolveCoreDir } from '../core-dirs.js';

export function handleCapture(ctx: AgentContext, id: number, p: CaptureParams): Promise<void> {
  const { host, opts } = ctx;
  return whileActive(ctx, id, async (signal) => {
    try {
      const first = ctx.coreDirs[0];
      if (first === undefined) {
        refuse(
          ctx,
          id,
          'capture',
          mqdError(
            'MQD_E_CORE_DIR_FORBIDDEN',
            `the agent on ${host} has no core directory (--core-dir), so it keeps no cores`,
          ),
        );
        return;
      }
      const root = resolveCoreDir(first, ctx.coreDirs);
      if (!root.ok) {
        refuse(ctx, id, 'capture', root.error);
        return;
      }
      if (!CAPTURE_NAME_RE.test(p.name)) {
        refuse(
          ctx,
          id,
          'capture',
          mqdError('MQD_E_BAD_INPUT', 'a capture directory name is one plain path component'),
        );
        return;
      }
      const capture = opts.reader.capture?.bind(opts.reader);
      if (capture === undefined) {
        refuse(
          ctx,
          id,
          'capture',
          mqdError('MQD_E_CORE_DIR_FORBIDDEN', `the agent on ${host} has no core writer`),
        );
        return;
      }
      const r = await capture(p.ranks, join(root.value, p.name), { host, ownerUid: p.ownerUid, signal });
      if (!r.ok) {
        ctx.failed(new MqdException(r.error));
        refuse(ctx, id, 'capture', r.error);
        return;
      }
      // Every asked rank once: unanswered ones are errors, others dropped.
      const asked = new Map(p.ranks.map((x) => [x.rank, x.pid]));
      const ranks = r.value.ranks
        .filter((x) => asked.delete(x.rank))
        .map((x) => ({ ...x, error: x.error === null ? null : wireErrorOf(x.error) }));
      for (const [rank, pid] of asked) {
        ranks.push({
          rank,
          pid,
          core: null,
          bytes: 0,
          pausedMicros: 0,
          error: mqdError('MQD_E_INTERNAL', `the capture gave nothing for rank ${rank}`),
        });
      }
      ranks.sort((a, b) => a.rank - b.rank);
      ctx.send({ type: 'reply', id, method: 'capture', ok: true, result: { dir: r.value.dir, ranks } });
    } catch (e) {
      refuse(ctx, id, 'capture', ctx.failed(e));
    }
  });
}
