// The `snapshot` request: read the asked ranks (live processes, or core files inside the agent's
// core directories, owned by the job's owner), answer every rank once in chunks within the
// message limit, then the reply.
import { type MqdError, MqdException, mqdError, type RankSnapshot } from '@mqd/model';
import type { SnapshotParams } from '../../protocol/agent-protocol.js';
import type { CoreRead } from '../../shared/seams.js';
import { chunkMessages, clipCore, clipMpi, completeAnswer, rankBudget } from '../agent-messages.js';
import type { AgentContext } from '../context.js';
import { coreFileAllowed, coreFilesOwner } from '../core-dirs.js';

/**
 * The cores of a core snapshot request, re-checked here: every rank names a core, each one
 * inside an allowed directory, all owned by the job's owner (uid 0 only when allowRoot).
 */
function checkCoreRequest(ctx: AgentContext, p: SnapshotParams): MqdError | null {
  const paths: string[] = [];
  for (const t of p.ranks) {
    if (t.core === undefined) {
      return mqdError('MQD_E_BAD_INPUT', 'a snapshot request mixes core files and live processes');
    }
    const a = coreFileAllowed(t.core, ctx.coreDirs);
    if (!a.ok) return a.error;
    paths.push(a.value);
  }
  const owner = coreFilesOwner(paths);
  if (!owner.ok) return owner.error;
  if (p.ownerUid === undefined || owner.value !== p.ownerUid) {
    return mqdError(
      'MQD_E_FORBIDDEN',
      `the cores belong to uid ${owner.value}, not to the job's owner ${p.ownerUid ?? '(none given)'}`,
    );
  }
  if (owner.value === 0 && p.allowRoot !== true) {
    return mqdError('MQD_E_ROOT_PROCESS', 'the cores belong to root; only an admin may open them');
  }
  return null;
}

export async function handleSnapshot(ctx: AgentContext, id: number, p: SnapshotParams): Promise<void> {
  const { host, opts } = ctx;
  const started = performance.now();
  const ac = new AbortController();
  ctx.active.set(id, ac);
  let got: RankSnapshot[] = [];
  let failure: MqdError | null = null;
  const isCore = p.ranks.some((t) => t.core !== undefined);
  let coreRead: CoreRead | null = null;
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        ac.abort();
        reject(
          new MqdException(
            mqdError('MQD_E_DLL_TIMEOUT', `reading ${p.ranks.length} ranks took over ${p.timeoutMs} ms`),
          ),
        );
      }, p.timeoutMs);
    });
    const ro = {
      host,
      timeoutMs: p.timeoutMs,
      signal: ac.signal,
      ...(p.ownerUid === undefined ? {} : { ownerUid: p.ownerUid }),
      ...(p.allowRoot === true ? { allowRoot: true } : {}),
      ...(p.light === true ? { light: true } : {}),
      // Expressions are data for the reader (checked against the protocol's caps on arrival),
      // read only for live ranks.
      ...(p.evals !== undefined && p.evals.length > 0 && !isCore ? { evals: p.evals } : {}),
      maxRankBytes: rankBudget(ctx.maxBytes()),
    };
    if (isCore) {
      const refused = checkCoreRequest(ctx, p);
      if (refused !== null) throw new MqdException(refused);
      const readCores = opts.reader.readCores?.bind(opts.reader);
      if (readCores === undefined) {
        throw new MqdException(
          mqdError('MQD_E_CORE_DIR_FORBIDDEN', `the agent on ${host} has no core reader`),
        );
      }
      coreRead = await Promise.race([readCores(p.ranks, ro), timeout]);
      // Checked again after the read: a core swapped meanwhile (a symlink to another user's
      // core) must not end up in this job. The reader itself reads as the file's owner.
      const after = checkCoreRequest(ctx, p);
      if (after !== null) {
        coreRead = null;
        throw new MqdException(after);
      }
      got = coreRead.ranks;
    } else {
      got = await Promise.race([opts.reader.read(p.ranks, ro), timeout]);
    }
  } catch (e) {
    // A failed read is data for the snapshot (error ranks), not a reason to stop the agent.
    failure = ctx.failed(e);
    ctx.log(`agent ${ctx.agentId}: read failed: ${failure.message}`);
  } finally {
    clearTimeout(timer);
    ctx.active.delete(id);
  }
  if (ac.signal.aborted && failure === null) return; // disconnected meanwhile: nobody waits
  const answer = completeAnswer(p.ranks, Array.isArray(got) ? got : [], host, failure);
  for (const chunk of chunkMessages(id, answer, host, ctx.maxBytes())) {
    if (!ctx.send(chunk)) return;
  }
  // Only the cores of ranks asked for, once each.
  const asked = new Set(p.ranks.map((t) => t.rank));
  const cores = isCore
    ? (coreRead?.cores ?? [])
        .filter((c) => asked.delete(c.rank))
        .sort((a, b) => a.rank - b.rank)
        .map(clipCore)
    : undefined;
  ctx.send({
    type: 'reply',
    id,
    method: 'snapshot',
    ok: true,
    result: {
      count: answer.length,
      mpi: clipMpi(opts.reader.mpi),
      durationMicros: Math.round((performance.now() - started) * 1000),
      ...(cores === undefined ? {} : { cores }),
    },
  });
}
