import { describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, loadConfig } from '../src/http/config.js';

describe('loadConfig', () => {
  it('takes defaults, then MQD_* variables, then CLI flags', () => {
    const r = loadConfig({
      env: { MQD_PORT: '9000', MQD_HOST: '0.0.0.0', MQD_AUTO_SNAPSHOT_SECONDS: '30' },
      argv: [
        '--port',
        '9100',
        '--proxy-user-header',
        'X-Remote-User',
        '--max-snapshots-per-job',
        '7',
        '--allow-insecure-http',
      ],
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value).toMatchObject({
      port: 9100,
      host: '0.0.0.0',
      autoSnapshotSeconds: 30,
      proxyUserHeader: 'x-remote-user',
      maxSnapshotsPerJob: 7,
      maxMessageBytes: DEFAULT_CONFIG.maxMessageBytes,
    });
  });

  it('refuses bad values and unknown flags with MQD_E_USAGE naming the setting', () => {
    const cases: [Record<string, string>, string[], RegExp][] = [
      [{ MQD_PORT: 'eighty' }, [], /MQD_PORT: expected a whole number/],
      [{}, ['--port', '70000'], /--port: must be in \[0, 65535\]/],
      [{ MQD_AGENT_TOKEN: 'short' }, [], /at least 16 characters/],
      [{}, ['--proxy-user-header', 'bad header'], /not a header name/],
      [{}, ['--colour', 'blue'], /Unknown option '--colour'/],
      [{}, ['--share-ttl-seconds', '100', '--max-share-ttl-seconds', '10'], /must not exceed/],
    ];
    for (const [env, argv, re] of cases) {
      const r = loadConfig({ env, argv });
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error.code).toBe('MQD_E_USAGE');
        expect(r.error.message).toMatch(re);
      }
    }
  });
});
