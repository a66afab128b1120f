// The props every page of the dashboard receives from the App shell. Kept apart from App.tsx,
// which imports the views: a view importing its props from App would close an import cycle.
import type { Api } from './api.js';
import type { LoadedSnapshot } from './data.js';
import type { Live } from './live.js';
import type { UrlState } from './url-state.js';

export type SetUrl = (patch: Partial<UrlState>, how?: 'push' | 'replace') => void;

/** Props of the pages that talk to the live server (jobs, fleet). */
export interface LivePageProps {
  readonly api: Api;
  /** The page's live connection, null when it has none. */
  readonly live: Live | null;
  readonly url: UrlState;
  readonly setUrl: SetUrl;
  readonly onUnauthenticated: () => void;
}

/** Props of the views of one snapshot (matrix, timeline, order, rank, stacks). */
export interface ViewProps {
  readonly api: Api;
  readonly url: UrlState;
  readonly setUrl: SetUrl;
  readonly data: LoadedSnapshot;
}
