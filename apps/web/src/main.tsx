// Entry of the dashboard page.
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App, type PendingSwitch } from './App.js';
import { type Api, createApi } from './api.js';
import { initIdle, trackBusy } from './idle.js';
import './styles.css';

const root = document.getElementById('root');
if (!root) throw new Error('MQD: index.html has no #root element');
initIdle();

/**
 * `mqd serve` prints a login URL with ?token=… (like Jupyter): exchange it for a session before
 * anything else asks the API, and take it out of the address bar and the history. A session of
 * another user is never replaced here: the server refuses (MQD_E_SESSION_CONFLICT) and the page
 * asks the person (PendingSwitch), since the link may come from someone else (login CSRF).
 */
async function loginFromUrl(api: Api): Promise<PendingSwitch | null> {
  const here = new URL(window.location.href);
  const token = here.searchParams.get('token');
  if (token === null) return null;
  here.searchParams.delete('token');
  window.history.replaceState(window.history.state, '', `${here.pathname}${here.search}${here.hash}`);
  // A failed login falls through to the login form, which shows the coded error on retry.
  const r = await trackBusy(api.login(token));
  return !r.ok && r.error.code === 'MQD_E_SESSION_CONFLICT' ? { token, error: r.error } : null;
}

const api = createApi();
void loginFromUrl(api).then((pendingSwitch) =>
  createRoot(root).render(
    <StrictMode>
      <App api={api} pendingSwitch={pendingSwitch} />
    </StrictMode>,
  ),
);
