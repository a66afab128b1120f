import { describe, expect, it } from 'vitest';
import { localHost, normaliseHost } from '../src/index.js';

describe('normaliseHost', () => {
  const here = localHost('Node17.Cluster.Example.org');

  it('knows this machine by its short, lower-case name', () => {
    expect(here.short).toBe('node17');
    expect(normaliseHost('Node17.Cluster.Example.org', here)).toBe('node17');
    expect(normaliseHost('NODE17', here)).toBe('node17');
    expect(normaliseHost('node17.cluster.example.org.', here)).toBe('node17');
  });

  it('maps every loopback spelling, and a missing name, to this machine', () => {
    for (const n of [
      'localhost',
      'LOCALHOST',
      'localhost.localdomain',
      '127.0.0.1',
      '127.0.1.1',
      '::1',
      '',
      ' ',
      null,
    ]) {
      expect([n, normaliseHost(n, here)]).toEqual([n, 'node17']);
    }
  });

  it('shortens and lower-cases other hosts, but keeps address literals whole', () => {
    expect(normaliseHost('Node18.cluster.example.org', here)).toBe('node18');
    expect(normaliseHost('node18', here)).toBe('node18');
    expect(normaliseHost('10.1.2.3', here)).toBe('10.1.2.3');
    expect(normaliseHost('fe80::1', here)).toBe('fe80::1');
  });

  it('a short name of this machine under another domain is this machine', () => {
    expect(normaliseHost('node17.ib.example.org', here)).toBe('node17');
  });

  it('defaults to the real host name', () => {
    const real = localHost();
    expect(normaliseHost('localhost')).toBe(real.short);
    expect(real.short).toBe(real.short.toLowerCase());
    expect(real.short.includes('.')).toBe(false);
  });
});
