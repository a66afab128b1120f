// Signing in: the token form a page without a session shows, and the question a `?token=` link
// of another user asks (main.tsx exchanges the link's token before the App mounts).
import { useState } from 'react';
import type { Api, ApiError } from './api.js';
import { trackBusy } from './idle.js';
import { ErrorBox } from './ui.js';

/**
 * A `?token=` link of another user than the one this browser is signed in as: the server kept
 * the session (MQD_E_SESSION_CONFLICT, whose message names both users) and only a click here
 * replaces it. A link someone else sent must not sign an admin in as them unasked.
 */
export interface PendingSwitch {
  readonly token: string;
  readonly error: ApiError;
}

type FormState =
  | { readonly kind: 'idle' }
  | { readonly kind: 'busy' }
  | { readonly kind: 'error'; readonly error: ApiError };

export function SwitchUserBanner({
  api,
  ask,
  onStay,
  onSwitched,
}: {
  api: Api;
  ask: PendingSwitch;
  onStay: () => void;
  onSwitched: () => void;
}) {
  const [state, setState] = useState<FormState>({ kind: 'idle' });
  const confirm = async () => {
    setState({ kind: 'busy' });
    const r = await trackBusy(api.login(ask.token, true));
    if (r.ok) onSwitched();
    else setState({ kind: 'error', error: r.error });
  };
  return (
    <div className="banner switch-user" role="alertdialog" data-testid="switch-user">
      <p>
        The link you opened signs in as another user than the one this browser is signed in as. You stay
        signed in unless you switch.
      </p>
      <ErrorBox error={ask.error} />
      <button
        type="button"
        onClick={confirm}
        disabled={state.kind === 'busy'}
        data-testid="switch-user-confirm"
      >
        Switch to the link's user
      </button>{' '}
      <button type="button" onClick={onStay}>
        Stay signed in
      </button>
      {state.kind === 'error' && <ErrorBox error={state.error} />}
    </div>
  );
}

export function LoginForm({ api, onDone }: { api: Api; onDone: () => void }) {
  const [token, setToken] = useState('');
  const [state, setState] = useState<FormState>({ kind: 'idle' });
  return (
    <form
      className="login"
      onSubmit={async (e) => {
        e.preventDefault();
        setState({ kind: 'busy' });
        const r = await trackBusy(api.login(token.trim()));
        if (r.ok) onDone();
        else setState({ kind: 'error', error: r.error });
      }}
    >
      <h2>Log in</h2>
      <p>
        Paste the token printed by <code>mqd serve</code>.
      </p>
      <input type="password" value={token} onChange={(e) => setToken(e.target.value)} aria-label="Token" />
      <button type="submit" disabled={state.kind === 'busy' || token.trim() === ''}>
        {state.kind === 'busy' ? 'Checking…' : 'Log in'}
      </button>
      {state.kind === 'error' && <ErrorBox error={state.error} />}
    </form>
  );
}
