// --store / MQD_STORE_URL: which store a value picks, what is refused, and that the URL's
// password never shows (errors, the redacted form, the environment once read).
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/http/config.js';
import { dropSecretsFromEnv } from '../src/shared/secrets.js';
import { describeStore, parseStoreUrl, redactStoreUrl } from '../src/store/store-url.js';

const PASSWORD = 'pw-Zq81x';

describe('--store', () => {
  it('picks PostgreSQL for postgres:// and postgresql://, SQLite for nothing, sqlite: or a directory', () => {
    expect(parseStoreUrl(`postgres://mqd:${PASSWORD}@db.example:5432/mqd?sslmode=verify-full`)).toMatchObject(
      {
        ok: true,
        value: { kind: 'postgres' },
      },
    );
    expect(parseStoreUrl('postgresql://mqd@/mqd?host=/run/postgresql')).toMatchObject({
      ok: true,
      value: { kind: 'postgres', url: 'postgresql://mqd@/mqd?host=/run/postgresql' },
    });
    expect(parseStoreUrl('sqlite:')).toEqual({ ok: true, value: { kind: 'sqlite', dataDir: null } });
    expect(parseStoreUrl('sqlite:/var/lib/mqd')).toEqual({
      ok: true,
      value: { kind: 'sqlite', dataDir: '/var/lib/mqd' },
    });
    expect(parseStoreUrl('sqlite:///var/lib/mqd')).toEqual({
      ok: true,
      value: { kind: 'sqlite', dataDir: '/var/lib/mqd' },
    });
    expect(parseStoreUrl('/var/lib/mqd')).toEqual({
      ok: true,
      value: { kind: 'sqlite', dataDir: '/var/lib/mqd' },
    });
    for (const bad of ['mysql://x', 'relative/dir', 'sqlite:rel', 'sqlite:/a/../b']) {
      expect(parseStoreUrl(bad)).toMatchObject({ ok: false, error: { code: 'MQD_E_USAGE' } });
    }
  });

  it('is a setting of mqd serve (flag or variable), refused without quoting the URL', () => {
    const url = `postgres://mqd:${PASSWORD}@db.example/mqd`;
    const byFlag = loadConfig({ argv: ['--store', url] });
    expect(byFlag).toMatchObject({ ok: true, value: { storeUrl: url } });
    const byEnv = loadConfig({ env: { MQD_STORE_URL: url } });
    expect(byEnv).toMatchObject({ ok: true, value: { storeUrl: url } });
    expect(loadConfig({})).toMatchObject({ ok: true, value: { storeUrl: null } });
    const bad = loadConfig({ env: { MQD_STORE_URL: `postgres://mqd:${PASSWORD}@[bad/mqd` } });
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.error.code).toBe('MQD_E_USAGE');
    expect(bad.error.message).not.toContain(PASSWORD);
    const other = loadConfig({ argv: ['--store', `mongodb://u:${PASSWORD}@h/db`] });
    expect(other.ok ? '' : other.error.message).not.toContain(PASSWORD);
  });

  it('shows the URL only without its password, and leaves the environment once read', () => {
    const url = `postgres://mqd:${PASSWORD}@db.example:5432/mqd?sslmode=require&password=${PASSWORD}`;
    const shown = redactStoreUrl(url);
    expect(shown).not.toContain(PASSWORD);
    expect(shown).toContain('db.example:5432/mqd');
    expect(describeStore(url, '/d')).not.toContain(PASSWORD);
    expect(describeStore(null, '/d')).toBe('sqlite in /d');
    expect(redactStoreUrl(`postgresql://mqd:${PASSWORD}@/mqd?host=/run/postgresql`)).toBe(
      'postgresql://mqd:***@/mqd?host=/run/postgresql',
    );
    expect(redactStoreUrl(`postgres://mqd:a@${PASSWORD}@db/mqd`)).toBe('postgres://mqd:***@db/mqd');
    expect(redactStoreUrl('postgres://mqd@db/mqd?sslmode=require')).toBe(
      'postgres://mqd@db/mqd?sslmode=require',
    );
    const env: NodeJS.ProcessEnv = { MQD_STORE_URL: url, MQD_PORT: '1' };
    expect(dropSecretsFromEnv(env)).toEqual(['MQD_STORE_URL']);
    expect(env).toEqual({ MQD_PORT: '1' });
  });
});
