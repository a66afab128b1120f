// MQD_READ_BUDGET_BYTES, the setting the MQD_E_READ_BUDGET hint tells users to raise.
import { describe, expect, it } from 'vitest';
import { DEFAULT_READ_BUDGET_BYTES, readBudgetFromEnv } from '../src/index.js';

describe('read budget', () => {
  it('is 64 MiB by default, MQD_READ_BUDGET_BYTES when that is a sane byte count', () => {
    expect(readBudgetFromEnv({})).toBe(64 << 20);
    expect(DEFAULT_READ_BUDGET_BYTES).toBe(64 << 20);
    expect(readBudgetFromEnv({ MQD_READ_BUDGET_BYTES: String(1 << 30) })).toBe(1 << 30);
    for (const bad of ['', 'lots', '-5', '0', '12.5', '100']) {
      expect(readBudgetFromEnv({ MQD_READ_BUDGET_BYTES: bad })).toBe(64 << 20);
    }
  });
});
