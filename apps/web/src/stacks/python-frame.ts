// A node of the stack tree that is a CPython frame (the model's mixedFrames puts a thread's
// Python frames in place of the interpreter's): it has no module, a function name, and by line
// a `.py` file. The Stacks view marks it as Python.
import type { StackNode } from '@mqd/model';
import './python-frame.css';

export function isPythonNode(n: StackNode): boolean {
  return n.module === null && n.function !== '??' && (n.file === null || /\.pyw?$/.test(n.file));
}
