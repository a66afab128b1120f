// The request the agent sends its locate child (locate-main.ts); it answers the starter's
// JobRanks or a coded error (the messages around it are owner-child.ts's).
import type { MethodChoice } from '@mqd/mpir';

export interface LocateRequest {
  readonly type: 'locate';
  readonly pid: number;
  readonly method?: MethodChoice;
  readonly here: { readonly short: string; readonly aliases: readonly string[] };
}
