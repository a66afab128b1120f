// The admins' watch-policy form as values: the text a person types in each field, read back
// into the ApiWatchPolicy the server takes (POST /api/admin/watch), with a sentence per field
// that is wrong. The limits are the spec's (packages/model watch-spec.ts ApiWatchPolicy), so
// the form refuses what the server would refuse, before asking it. Pure, tested in node.
import type { ApiWatchPolicy } from '@mqd/model';

export interface PolicyFields {
  readonly enabled: boolean;
  readonly periodSeconds: string;
  /** Names separated by commas or spaces; empty = everyone. */
  readonly users: string;
  readonly partitions: string;
  readonly accounts: string;
  /** Program file names, or path prefixes (with a `/`); empty = every program. */
  readonly programs: string;
  readonly stopBudgetMsPerRankHour: string;
  readonly hungAfterSamples: string;
  /** Keep cores of each hung job in the agents' core directory (the server refuses it without one). */
  readonly captureCores: boolean;
}

export type PolicyField = keyof PolicyFields;
export type PolicyErrors = Partial<Record<PolicyField, string>>;

/** The spec's limits (watch-spec.ts), each with the words a field's error uses. */
export const POLICY_LIMITS = {
  periodSeconds: { min: 1, max: 86_400, what: 'The sample period', unit: 's' },
  stopBudgetMsPerRankHour: { min: 0, max: 3_600_000, what: 'The stop budget', unit: 'ms' },
  hungAfterSamples: { min: 2, max: 1000, what: 'Hung after', unit: 'samples' },
} as const;
export const MAX_NAME_CHARS = 128;
export const MAX_NAMES = 1024;

export function policyFields(p: ApiWatchPolicy): PolicyFields {
  return {
    enabled: p.enabled,
    periodSeconds: String(p.periodSeconds),
    users: p.users.join(', '),
    partitions: p.partitions.join(', '),
    accounts: p.accounts.join(', '),
    programs: (p.programs ?? []).join(', '),
    stopBudgetMsPerRankHour: String(p.stopBudgetMsPerRankHour),
    hungAfterSamples: String(p.hungAfterSamples),
    captureCores: p.captureCores === true,
  };
}

function integer(text: string, limit: (typeof POLICY_LIMITS)[keyof typeof POLICY_LIMITS]): number | string {
  const t = text.trim();
  const range = `${limit.min.toLocaleString('en-US')} to ${limit.max.toLocaleString('en-US')} ${limit.unit}`;
  if (!/^\d{1,10}$/.test(t)) return `${limit.what} must be a whole number from ${range}.`;
  const n = Number(t);
  return n < limit.min || n > limit.max ? `${limit.what} must be from ${range}; ${t} is not.` : n;
}

function names(text: string, what: string): string[] | string {
  const list = text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const long = list.find((s) => s.length > MAX_NAME_CHARS);
  if (long !== undefined) return `${what}: a name has at most ${MAX_NAME_CHARS} characters.`;
  if (list.length > MAX_NAMES) return `${what}: at most ${MAX_NAMES.toLocaleString('en-US')} names.`;
  return [...new Set(list)];
}

/** The policy the fields say, or what is wrong with each field that is. */
export function parsePolicyFields(
  f: PolicyFields,
):
  | { readonly ok: true; readonly policy: ApiWatchPolicy }
  | { readonly ok: false; readonly errors: PolicyErrors } {
  const errors: PolicyErrors = {};
  const period = integer(f.periodSeconds, POLICY_LIMITS.periodSeconds);
  const budget = integer(f.stopBudgetMsPerRankHour, POLICY_LIMITS.stopBudgetMsPerRankHour);
  const hung = integer(f.hungAfterSamples, POLICY_LIMITS.hungAfterSamples);
  const users = names(f.users, 'Users');
  const partitions = names(f.partitions, 'Partitions');
  const accounts = names(f.accounts, 'Accounts');
  const programs = names(f.programs, 'Programs');
  if (typeof period === 'string') errors.periodSeconds = period;
  if (typeof budget === 'string') errors.stopBudgetMsPerRankHour = budget;
  if (typeof hung === 'string') errors.hungAfterSamples = hung;
  if (typeof users === 'string') errors.users = users;
  if (typeof partitions === 'string') errors.partitions = partitions;
  if (typeof accounts === 'string') errors.accounts = accounts;
  if (typeof programs === 'string') errors.programs = programs;
  if (
    typeof period === 'string' ||
    typeof budget === 'string' ||
    typeof hung === 'string' ||
    typeof users === 'string' ||
    typeof partitions === 'string' ||
    typeof accounts === 'string' ||
    typeof programs === 'string'
  )
    return { ok: false, errors };
  return {
    ok: true,
    policy: {
      enabled: f.enabled,
      periodSeconds: period,
      users,
      partitions,
      accounts,
      ...(programs.length > 0 ? { programs } : {}),
      stopBudgetMsPerRankHour: budget,
      hungAfterSamples: hung,
      captureCores: f.captureCores,
    },
  };
}
