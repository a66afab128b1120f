// The `locate` request: a job by its starter's pid, its Slurm job id, or a directory of core
// files inside the agent's core directories (their owner read here, not taken from the locator).
import { err, mqdError, ok, type Result } from '@mqd/model';
import type { LocateTarget } from '../../protocol/agent-protocol.js';
import type { JobLocator, LocatedJob } from '../../shared/seams.js';
import { clipLocated } from '../agent-messages.js';
import { type AgentContext, refuse, whileActive } from '../context.js';
import { coreFileAllowed, coreFilesOwner, resolveCoreDir } from '../core-dirs.js';

/**
 * The cores of `dir`, after this agent's own checks: the directory lies inside its allowed
 * roots, every core the locator names lies there too, and the owner is the files' one uid
 * (read here, not taken from the locator).
 */
async function locateCores(
  ctx: AgentContext,
  locator: JobLocator | null | undefined,
  dir: string,
): Promise<Result<LocatedJob>> {
  const real = resolveCoreDir(dir, ctx.coreDirs);
  if (!real.ok) return real;
  if (!locator?.locateCores) {
    return err(
      mqdError('MQD_E_CORE_DIR_FORBIDDEN', `agent ${ctx.agentId} on ${ctx.host} cannot read core files`),
    );
  }
  const r = await locator.locateCores(real.value);
  if (!r.ok) return r;
  const paths: string[] = [];
  for (const x of r.value.ranks) {
    if (x.core === undefined)
      return err(mqdError('MQD_E_INTERNAL', `the locator named no core for rank ${x.rank}`));
    const a = coreFileAllowed(x.core, ctx.coreDirs);
    if (!a.ok) return a;
    paths.push(a.value);
  }
  const owner = coreFilesOwner(paths);
  if (!owner.ok) return owner;
  // The locator read the cores' headers (their command line, pid) from files of uid
  // r.value.uid; the job goes to the uid the paths name now. A core swapped in and back
  // between the two (another user's, root's) must not hand its command line to this one.
  if (r.value.uid >= 0 && r.value.uid !== owner.value) {
    return err(
      mqdError(
        'MQD_E_CORE_INVALID',
        `the cores of ${real.value} changed owner while they were located (uid ${r.value.uid}, now uid ${owner.value}): attach the directory again`,
      ),
    );
  }
  return ok({
    ...r.value,
    uid: owner.value,
    coresDir: real.value,
    ranks: r.value.ranks.map((x) => ({ ...x, host: ctx.host })),
  });
}

async function locateOnce(ctx: AgentContext, target: LocateTarget): Promise<Result<LocatedJob>> {
  const locator = ctx.opts.locator;
  if ('coresDir' in target) return locateCores(ctx, locator, target.coresDir);
  if (!locator) {
    return err(mqdError('MQD_E_NOT_STARTER', `agent ${ctx.agentId} on ${ctx.host} has no job locator`));
  }
  if ('slurmJob' in target) {
    const slurm = locator.locateSlurm?.bind(locator);
    if (slurm === undefined) {
      return err(mqdError('MQD_E_NO_SLURM', `agent ${ctx.agentId} on ${ctx.host} cannot locate Slurm jobs`));
    }
    return slurm(target.slurmJob);
  }
  return locator.locate('starterPid' in target ? target.starterPid : 0);
}

/** Listed as active for the keepalives; a locate has nothing to abort. */
export function handleLocate(ctx: AgentContext, id: number, target: LocateTarget): Promise<void> {
  return whileActive(ctx, id, async () => {
    let r: Result<LocatedJob>;
    try {
      r = await locateOnce(ctx, target);
    } catch (e) {
      refuse(ctx, id, 'locate', ctx.failed(e));
      return;
    }
    if (r.ok) ctx.send({ type: 'reply', id, method: 'locate', ok: true, result: clipLocated(r.value) });
    else refuse(ctx, id, 'locate', r.error);
  });
}
