// `--pid PID[:RANK]`, shared by `mqd snapshot` and `mqd ranks`.
import type { SnapshotTarget } from '@mqd/core';
import { type MqdError, mqdError } from '@mqd/model';

export function parsePidArg(s: string): SnapshotTarget | MqdError {
  const m = /^(\d+)(?::(\d+))?$/.exec(s);
  if (!m?.[1]) return mqdError('MQD_E_USAGE', `--pid takes PID or PID:RANK, got '${s}'`);
  const pid = Number(m[1]);
  if (pid < 1 || pid > 0x3fffffff) return mqdError('MQD_E_USAGE', `pid ${pid} is out of range`);
  return m[2] !== undefined ? { pid, rank: Number(m[2]) } : { pid };
}
