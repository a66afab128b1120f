// The locate child: reads a starter's MPIR table (ELF/DWARF parsing and process memory, through
// @mqd/mpir) as the starter's owner. The agent forks it with that uid/gid when it is root; it
// sets PR_SET_NO_NEW_PRIVS and checks who it is before it looks at anything (enterReader).
import { enterReader, setParentDeathSignal } from '@mqd/core';
import { attachStarter } from '@mqd/mpir';
import type { LocateMessage, LocateRequest } from './locate-protocol.js';

const SIGKILL = 9;
setParentDeathSignal(SIGKILL);
if (process.ppid === 1) process.exit(1);

function send(m: LocateMessage, then: () => void = () => {}): void {
  process.send?.(m, then);
}

const entered = enterReader();
if (!entered.ok) {
  send({ type: 'privdrop', error: entered.error }, () => process.exit(1));
} else {
  process.once('message', (req: LocateRequest) => {
    const here = { short: req.here.short, aliases: new Set(req.here.aliases) };
    const result = attachStarter(req.pid, { here, ...(req.method ? { method: req.method } : {}) });
    send({ type: 'located', result }, () => process.exit(0));
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', credentials: entered.value });
}
