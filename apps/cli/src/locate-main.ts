// The locate child: reads a starter's MPIR table (ELF/DWARF parsing and process memory, through
// @mqd/mpir) as the starter's owner. The agent forks it with that uid/gid when it is root; it
// sets PR_SET_NO_NEW_PRIVS and checks who it is before it looks at anything (owner-child.ts).
import { attachStarter, type JobRanks } from '@mqd/mpir';
import type { LocateRequest } from './locate-protocol.js';
import { serveAsOwner } from './owner-child.js';

serveAsOwner<LocateRequest, JobRanks>((req) => {
  const here = { short: req.here.short, aliases: new Set(req.here.aliases) };
  return attachStarter(req.pid, { here, ...(req.method ? { method: req.method } : {}) });
});
