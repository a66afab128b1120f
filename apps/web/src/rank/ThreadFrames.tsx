// One thread's frames in the rank view, innermost first. A CPython thread's Python frames stand
// in place of the interpreter's evaluation loop (the model's mixedFrames), marked as Python, and
// the interpreter's other C frames and mpi4py's wrappers are folded (counted under the table),
// so the Python line that made an MPI call sits right above the call.
import { isMpiFrame, mixedFrames, type ThreadStack } from '@mqd/model';
import { type RefObject, useMemo } from 'react';
import '../stacks/python-frame.css';

function basename(p: string): string {
  const i = p.lastIndexOf('/');
  return i < 0 ? p : p.slice(i + 1);
}

export function ThreadFrames({
  thread,
  selectedFrame,
  selectedRow,
}: {
  thread: ThreadStack;
  /** Depth (in ThreadStack.frames) of the selected frame, null when none is. */
  selectedFrame: number | null;
  selectedRow: RefObject<HTMLTableRowElement | null>;
}) {
  const mixed = useMemo(() => mixedFrames(thread), [thread]);
  // A selected evaluation-loop frame is its innermost Python frame (where the user's line is).
  const selected = selectedFrame === null ? -1 : mixed.at.indexOf(selectedFrame);
  const pythonCount = mixed.python.filter(Boolean).length;
  const folded = thread.frames.length - (mixed.frames.length - pythonCount);
  return (
    <>
      <table className="ops compact frames">
        <thead>
          <tr>
            <th>#</th>
            <th>Function</th>
            <th>Source</th>
            <th>Module</th>
          </tr>
        </thead>
        <tbody>
          {mixed.frames.map((f, i) => {
            const python = mixed.python[i] === true;
            return (
              <tr
                // biome-ignore lint/suspicious/noArrayIndexKey: frame depth is the identity here.
                key={i}
                ref={i === selected ? selectedRow : undefined}
                className={`${isMpiFrame(f) ? 'mpi' : ''}${python ? ' python' : ''}${i === selected ? ' selected' : ''}`}
                aria-current={i === selected ? 'location' : undefined}
                data-testid={i === selected ? 'rank-frame-selected' : 'rank-frame'}
                data-python={python ? 'true' : undefined}
              >
                <td>{i}</td>
                <td className="fn" title={python ? 'Python function' : f.pc}>
                  {f.function === null ? <span className="muted">?? {f.pc}</span> : <bdi>{f.function}</bdi>}
                  {f.inlined && <span className="badge">inlined</span>}
                </td>
                <td>
                  {f.file === null ? (
                    '—'
                  ) : (
                    <>
                      <bdi>{basename(f.file)}</bdi>
                      {f.line === null ? '' : `:${f.line}`}
                    </>
                  )}
                </td>
                <td className="muted">
                  {python ? (
                    <span className="badge python">Python</span>
                  ) : f.module === null ? (
                    '—'
                  ) : (
                    <bdi>{basename(f.module)}</bdi>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {pythonCount > 0 && folded > 0 && (
        <p className="muted" data-testid="rank-frames-folded">
          {folded === 1 ? '1 frame' : `${folded} frames`} of the Python interpreter and mpi4py folded.
        </p>
      )}
    </>
  );
}
