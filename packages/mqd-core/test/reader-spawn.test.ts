// A reader started before its ReaderClient exists (what `mqd snapshot` does while it loads its own
// code, apps/cli/src/main.ts): the ReaderClient of that identity adopts it with everything it said
// meanwhile, a reader that died meanwhile is replaced, and one nobody adopts neither keeps its
// parent alive nor outlives it. Real reader children (from sources, through tsx).
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ReaderClient } from '../src/reader/client.js';
import { readerIdentity, startReaderEarly } from '../src/reader/reader-spawn.js';

const me = () => readerIdentity(process.getuid?.() ?? 0, process.getgid?.() ?? 0);
/** Our own process is no MPI rank: the reader answers with a coded error, which proves it answers. */
const resolveSelf = (h: ReaderClient) =>
  h.resolve([{ pid: process.pid, ownerUid: process.getuid?.() ?? 0, allowRoot: true }]);

/** Gone or a zombie waiting for its new parent to reap it. */
function ended(pid: number): boolean {
  try {
    return /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

describe('readers started early', () => {
  it('the ReaderClient of that identity adopts the started reader, with the ready it sent before', async () => {
    const child = startReaderEarly(me());
    if (!child?.pid) throw new Error('no early reader');
    expect(startReaderEarly(me())).toBeNull(); // one waits already
    await once(child, 'message'); // its `ready` went to the waiting list, not to a ReaderClient
    const host = new ReaderClient(null, {}, me());
    try {
      host.warmUp();
      expect(host.hostPid).toBe(child.pid);
      const [answer] = await resolveSelf(host);
      expect(answer && 'error' in answer ? answer.error.code : answer).toMatch(/^MQD_E_/);
      expect(host.starts).toBe(1);
      expect(host.credentials?.uid).toBe(process.getuid?.());
    } finally {
      await host.dispose();
    }
    expect(ended(child.pid)).toBe(true);
  });

  it('a started reader that died before it was adopted is not used: a fresh one answers', async () => {
    const child = startReaderEarly(me());
    if (!child?.pid) throw new Error('no early reader');
    const gone = once(child, 'exit');
    child.kill('SIGKILL');
    await gone;
    const host = new ReaderClient(null, {}, me());
    try {
      const [answer] = await resolveSelf(host);
      expect(answer && 'error' in answer ? answer.error.code : answer).toMatch(/^MQD_E_/);
      expect(answer && 'error' in answer ? answer.error.code : '').not.toBe('MQD_E_DLL_CRASHED');
      expect(host.starts).toBe(1);
      expect(host.hostPid).not.toBe(child.pid);
    } finally {
      await host.dispose();
    }
  });

  it('one nobody adopts does not keep its parent alive and is killed when the parent exits', async () => {
    const src = fileURLToPath(new URL('../src/reader/reader-spawn.ts', import.meta.url));
    const script = `const m = await import(${JSON.stringify(src)});
      const c = m.startReaderEarly(m.readerIdentity(process.getuid(), process.getgid()));
      process.stdout.write(String(c?.pid ?? 0));`;
    // Returns only if the parent exits by itself with the reader still unadopted.
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    const pid = Number(out);
    expect(pid).toBeGreaterThan(0);
    await expect.poll(() => ended(pid), { timeout: 10_000 }).toBe(true);
  });
});
