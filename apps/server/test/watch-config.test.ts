// The hang watch's flags and variables (config.ts): they parse into the policy that seeds the
// store, webhook URLs are checked without being quoted (they carry secrets), and the store's
// policy, once set, wins over the flags of a later start. Also the mqd_job_state family's
// escaping and bound (metrics.ts).
import { DEFAULT_WATCH_POLICY } from '@mqd/model';
import { describe, expect, it } from 'vitest';
import { loadConfig, watchPolicyOf } from '../src/http/config.js';
import { MAX_JOB_STATE_SERIES, MetricsRegistry, watchMetrics } from '../src/shared/metrics.js';
import { SqliteStore } from '../src/store/dialect-sqlite.js';
import { cleanupAfterEach, startServer } from './helpers.js';

const cleanup = cleanupAfterEach();

describe('watch configuration', () => {
  it('reads the --watch flags over the MQD_WATCH_* variables into a policy', () => {
    const c = loadConfig({
      env: {
        MQD_WATCH_ENABLED: 'off',
        MQD_WATCH_WEBHOOKS: 'https://hooks.example/T1/B2/xyz',
        MQD_WATCH_PERIOD: '30',
      },
      argv: [
        '--watch',
        'on',
        '--watch-period',
        '60',
        '--watch-users',
        'alice, bob',
        '--watch-partitions',
        'batch',
        '--watch-accounts',
        'physics,chem',
        '--watch-programs',
        '/scratch/proj/,lammps',
        '--watch-stop-budget',
        '250',
        '--watch-hung-after',
        '4',
        '--watch-webhook',
        'https://a.example/hook1',
        '--watch-webhook',
        'http://b.example/hook2,https://c.example/x',
      ],
    });
    if (!c.ok) throw new Error(c.error.message);
    expect(watchPolicyOf(c.value)).toEqual({
      enabled: true,
      periodSeconds: 60,
      users: ['alice', 'bob'],
      partitions: ['batch'],
      accounts: ['physics', 'chem'],
      programs: ['/scratch/proj/', 'lammps'],
      stopBudgetMsPerRankHour: 250,
      hungAfterSamples: 4,
    });
    // The flags replace the variable's list.
    expect(c.value.watchWebhooks).toEqual([
      'https://a.example/hook1',
      'http://b.example/hook2',
      'https://c.example/x',
    ]);
    const fromEnv = loadConfig({ env: { MQD_WATCH_WEBHOOKS: 'https://hooks.example/T1/B2/xyz' } });
    expect(fromEnv.ok && fromEnv.value.watchWebhooks).toEqual(['https://hooks.example/T1/B2/xyz']);
    // MQD_WATCH is a job's opt-out (MQD_WATCH=off in its environment), not the server's switch.
    const optOut = loadConfig({ env: { MQD_WATCH: 'on' } });
    expect(optOut.ok && optOut.value.watchEnabled).toBe(false);
    const none = loadConfig({});
    expect(none.ok && watchPolicyOf(none.value)).toEqual(DEFAULT_WATCH_POLICY);
  });

  it('refuses bad values with MQD_E_USAGE, never quoting a webhook URL', () => {
    const bad = (argv: string[]) => {
      const c = loadConfig({ argv });
      if (c.ok) throw new Error(`${argv.join(' ')} was accepted`);
      return c.error;
    };
    expect(bad(['--watch', 'maybe']).message).toMatch(/^MQD_E_USAGE: --watch: expected on or off/);
    expect(bad(['--watch-period', '0']).code).toBe('MQD_E_USAGE');
    expect(bad(['--watch-hung-after', '1']).code).toBe('MQD_E_USAGE');
    expect(bad(['--watch-stop-budget', '3600001']).code).toBe('MQD_E_USAGE');
    const url = bad([
      '--watch-webhook',
      'https://ok.example/a',
      '--watch-webhook',
      'ftp://host/SECRET-TOKEN',
    ]);
    expect(url.message).toMatch(/webhook 1 is not an http\(s\) URL/);
    expect(url.message).not.toContain('SECRET-TOKEN');
    const env = loadConfig({ env: { MQD_WATCH_WEBHOOKS: 'not a url SECRET-2' } });
    expect(env.ok).toBe(false);
    expect(env.ok ? '' : env.error.message).not.toContain('SECRET-2');
  });

  it('seeds the stored policy at the first start only; the store then wins over the flags', async () => {
    const store = new SqliteStore({
      dataDir: ':memory:',
      retention: { maxSnapshotsPerJob: 0, maxAgeSeconds: 0 },
    });
    cleanup.push(() => store.close());
    const first = await startServer({ watchEnabled: false, watchPeriodSeconds: 90 }, { store, slurm: null });
    expect((await store.watchPolicy())?.policy.periodSeconds).toBe(90);
    expect((await store.watchPolicy())?.updatedBy).toBe('watch');
    const changed = { ...DEFAULT_WATCH_POLICY, periodSeconds: 120, accounts: ['physics'] };
    const res = await first.app.inject({
      method: 'POST',
      url: '/api/admin/watch',
      headers: first.admin,
      payload: changed,
    });
    expect(res.statusCode).toBe(200);
    await first.close();
    const second = await startServer({ watchEnabled: false, watchPeriodSeconds: 45 }, { store, slurm: null });
    cleanup.push(() => second.close());
    const got = await second.app.inject({ method: 'GET', url: '/api/admin/watch', headers: second.admin });
    expect(JSON.parse(got.body)).toEqual(changed);
  });
});

describe('mqd_job_state', () => {
  it('escapes label values and keeps at most MAX_JOB_STATE_SERIES series', async () => {
    const reg = new MetricsRegistry();
    const jobs = Array.from({ length: MAX_JOB_STATE_SERIES + 5 }, (_, i) => ({
      job: i === 0 ? 'a"b\\c\nd' : `j${i}`,
      user: 'u',
      partition: '',
      state: 'hung',
    }));
    watchMetrics(reg, async () => jobs);
    const lines = (await reg.render()).split('\n').filter((l) => l.startsWith('mqd_job_state{'));
    expect(lines).toHaveLength(MAX_JOB_STATE_SERIES);
    expect(lines[0]).toBe('mqd_job_state{job="a\\"b\\\\c\\nd",partition="",state="hung",user="u"} 1');
  });
});
