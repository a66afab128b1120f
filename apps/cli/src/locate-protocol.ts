// The wire between the agent and its locate child (locate-main.ts): one request, one answer.
import type { ReaderCredentials } from '@mqd/core';
import type { MqdError, Result } from '@mqd/model';
import type { JobRanks, MethodChoice } from '@mqd/mpir';

export interface LocateRequest {
  readonly pid: number;
  readonly method?: MethodChoice;
  readonly here: { readonly short: string; readonly aliases: readonly string[] };
}

export type LocateMessage =
  | { readonly type: 'ready'; readonly credentials: ReaderCredentials }
  | { readonly type: 'privdrop'; readonly error: MqdError }
  | { readonly type: 'located'; readonly result: Result<JobRanks, MqdError> };
