// The text `mqd snapshot` prints: the queues, then (asked for) the merged stacks and the
// diagnosis. One function, so the command and the golden tests print the same thing.
import { formatSnapshot } from '@mqd/core';
import { type Explanation, formatExplanation, type JobSnapshot, jobText, type StackTree } from '@mqd/model';
import { formatStacks } from './stacks-text.js';

export interface SnapshotTextParts {
  readonly all?: boolean;
  readonly stackTree?: StackTree | null;
  readonly explanation?: Explanation | null;
}

export function snapshotText(snapshot: JobSnapshot, parts: SnapshotTextParts = {}): string {
  // The queue listing prints the job's names (communicators, hosts, the DLL's text): whatever
  // formatSnapshot wrote, no control or direction-changing character reaches the terminal.
  const listing = formatSnapshot(snapshot, { all: parts.all ?? false })
    .split('\n')
    .map((line) => jobText(line, Number.POSITIVE_INFINITY))
    .join('\n');
  const out = [listing];
  if (parts.stackTree) out.push(`\n${formatStacks(parts.stackTree)}`);
  if (parts.explanation) out.push(`\n${formatExplanation(parts.explanation)}`);
  return out.join('\n');
}
