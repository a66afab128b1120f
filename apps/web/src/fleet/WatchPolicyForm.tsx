// The admins' form for the hang watch's policy (POST /api/admin/watch): on or off, the sample
// period, whose jobs, the stop budget and after how many samples a job is hung. Each field says
// what is wrong with it before anything is sent (policy-form.ts); the server's refusal is shown
// as its coded error. The page keys it by the policy it started from, so a policy changed
// elsewhere (or saved here) starts it afresh.
import type { ApiWatchPolicy } from '@mqd/model';
import { useId, useState } from 'react';
import type { Api, ApiError } from '../api.js';
import { trackBusy } from '../idle.js';
import { ErrorBox } from '../ui.js';
import {
  type PolicyErrors,
  type PolicyField,
  type PolicyFields,
  parsePolicyFields,
  policyFields,
} from './policy-form.js';

type Status =
  | { readonly kind: 'editing' }
  | { readonly kind: 'saving' }
  | { readonly kind: 'failed'; readonly error: ApiError };

export function WatchPolicyForm({
  api,
  policy,
  onSaved,
}: {
  api: Pick<Api, 'setWatchPolicy'>;
  policy: ApiWatchPolicy;
  onSaved: (p: ApiWatchPolicy) => void;
}) {
  const [fields, setFields] = useState<PolicyFields>(() => policyFields(policy));
  const [errors, setErrors] = useState<PolicyErrors>({});
  const [status, setStatus] = useState<Status>({ kind: 'editing' });
  const id = useId();
  const set = (patch: Partial<PolicyFields>) => {
    setFields((f) => ({ ...f, ...patch }));
  };

  const submit = async () => {
    const parsed = parsePolicyFields(fields);
    if (!parsed.ok) {
      setErrors(parsed.errors);
      return;
    }
    setErrors({});
    setStatus({ kind: 'saving' });
    const r = await trackBusy(api.setWatchPolicy(parsed.policy));
    if (!r.ok) {
      setStatus({ kind: 'failed', error: r.error });
      return;
    }
    setStatus({ kind: 'editing' });
    onSaved(r.value);
  };

  const text = (
    name: Exclude<PolicyField, 'enabled' | 'captureCores'>,
    label: string,
    hint: string,
    numeric: boolean,
  ) => {
    const error = errors[name];
    const hintId = `${id}-${name}-hint`;
    const errorId = `${id}-${name}-error`;
    return (
      <div className="fleet-policy-field">
        <label htmlFor={`${id}-${name}`}>{label}</label>
        <input
          id={`${id}-${name}`}
          name={name}
          data-testid={`fleet-policy-${name}`}
          inputMode={numeric ? 'numeric' : 'text'}
          value={fields[name]}
          aria-invalid={error === undefined ? undefined : true}
          aria-describedby={error === undefined ? hintId : `${errorId} ${hintId}`}
          onChange={(e) => set({ [name]: e.target.value })}
        />
        <span id={hintId} className="muted">
          {hint}
        </span>
        {error !== undefined && (
          <span id={errorId} className="field-error" data-testid="fleet-policy-error">
            {error}
          </span>
        )}
      </div>
    );
  };

  return (
    <form
      className="fleet-policy-form"
      data-testid="fleet-policy-form"
      aria-label="Change the watch policy"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <div className="fleet-policy-field">
        <label>
          <input
            type="checkbox"
            name="enabled"
            data-testid="fleet-policy-enabled"
            checked={fields.enabled}
            onChange={(e) => set({ enabled: e.target.checked })}
          />{' '}
          Watch on (sample every job the policy covers)
        </label>
      </div>
      {text('periodSeconds', 'Sample period (s)', 'seconds between two samples of one job', true)}
      {text(
        'hungAfterSamples',
        'Hung after (samples)',
        'samples with nothing moving before a job is hung',
        true,
      )}
      {text(
        'stopBudgetMsPerRankHour',
        'Stop budget (ms per rank per hour)',
        'the most time the watch may keep one rank stopped each hour',
        true,
      )}
      <div className="fleet-policy-field">
        <label>
          <input
            type="checkbox"
            name="captureCores"
            data-testid="fleet-policy-captureCores"
            checked={fields.captureCores}
            onChange={(e) => set({ captureCores: e.target.checked })}
          />{' '}
          Keep cores of each hung job (written as its owner, in the core directory of each node)
        </label>
      </div>
      {text('users', 'Users', 'names separated by commas; empty: every user', false)}
      {text('partitions', 'Partitions', 'empty: every partition', false)}
      {text('accounts', 'Accounts', 'empty: every account', false)}
      {text(
        'programs',
        'Programs',
        'file names, or path prefixes such as /scratch/proj/; empty: every program',
        false,
      )}
      <div className="fleet-policy-actions">
        <button type="submit" data-testid="fleet-policy-save" disabled={status.kind === 'saving'}>
          {status.kind === 'saving' ? 'Saving…' : 'Save the policy'}
        </button>
      </div>
      {status.kind === 'failed' && <ErrorBox error={status.error} />}
    </form>
  );
}
