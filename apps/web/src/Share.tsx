// Sharing a live snapshot: the button that freezes it into `/s/<id>` and the link to hand out,
// which carries the view it was made from (url-state.ts `shareLinkOf`), and the banner a shared
// page shows.
import type { SnapshotId } from '@mqd/model';
import { useEffect, useState } from 'react';
import type { Api, ApiError } from './api.js';
import type { Viewed } from './data.js';
import { formatTime } from './format.js';
import { trackBusy } from './idle.js';
import { ErrorBox } from './ui.js';
import { shareLinkOf, type UrlState } from './url-state.js';

type ShareState =
  | { readonly kind: 'idle' }
  | { readonly kind: 'busy' }
  | { readonly kind: 'done'; readonly share: { readonly id: string; readonly url: string } }
  | { readonly kind: 'error'; readonly error: ApiError };

export function ShareButton({ api, snapshotId, url }: { api: Api; snapshotId: SnapshotId; url: UrlState }) {
  const [state, setState] = useState<ShareState>({ kind: 'idle' });
  // A new snapshot needs a new link.
  // biome-ignore lint/correctness/useExhaustiveDependencies: reset when the snapshot changes.
  useEffect(() => setState({ kind: 'idle' }), [snapshotId]);
  const share = async () => {
    setState({ kind: 'busy' });
    const r = await trackBusy(api.share(snapshotId));
    if (!r.ok) setState({ kind: 'error', error: r.error });
    else setState({ kind: 'done', share: r.value });
  };
  // The link follows the view: filters or a selection changed after the click travel too.
  const link = state.kind === 'done' ? shareLinkOf(url, state.share, location.origin) : null;
  return (
    <span className="share">
      <button type="button" data-testid="share-button" onClick={share} disabled={state.kind === 'busy'}>
        {state.kind === 'busy' ? 'Freezing…' : 'Share snapshot'}
      </button>
      {link !== null && (
        <span className="share-link" data-testid="share-link">
          <input readOnly value={link} onFocus={(e) => e.currentTarget.select()} aria-label="Share link" />
          <button type="button" onClick={() => void navigator.clipboard?.writeText(link)}>
            Copy
          </button>
        </span>
      )}
      {state.kind === 'error' && <ErrorBox error={state.error} compact />}
    </span>
  );
}

/** Above a shared page: the snapshot is frozen and the page cannot change it. */
export function ReadOnlyBanner({ data }: { data: Viewed }) {
  return (
    <div className="banner readonly" data-testid="read-only-banner" role="status">
      Frozen snapshot taken {formatTime(data.takenAt)} — read-only
      {data.jobId !== null && <span className="muted"> (job {data.jobId})</span>}
    </div>
  );
}
