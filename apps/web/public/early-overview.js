// Starts fetching the snapshot's overview (GET /api/snapshots/:id/overview, or a share's) while
// the dashboard's own code is still loading: a plain script, run before the app's modules, so
// the request leaves as soon as the page is parsed. The app (src/api.ts) takes this response
// instead of asking again when it wants the same overview; nothing else is done with it.
(() => {
  const q = new URLSearchParams(location.search);
  const share = /^\/s\/([A-Za-z0-9_-]{1,128})\/?$/.exec(location.pathname);
  const view = q.get('view') ?? (share ? 'matrix' : 'jobs');
  // A login link (?token=) has no session yet: the app asks once it has logged in.
  if (q.has('demo') || q.has('token') || !['matrix', 'timeline', 'order', 'rank', 'stacks'].includes(view))
    return;
  const snap = q.get('snap');
  const path = share
    ? `/api/shared/${encodeURIComponent(share[1])}/overview`
    : snap
      ? `/api/snapshots/${encodeURIComponent(snap)}/overview`
      : null;
  if (path === null) return;
  const response = fetch(path, {
    credentials: 'same-origin',
    headers: { accept: 'application/vnd.mqd.overview' },
  });
  // A failure is the app's to report when it asks; never an unhandled rejection here.
  response.catch(() => {});
  globalThis.__mqdEarlyOverview = { path, response };
})();
