import { describe, expect, it } from 'vitest';
import { normalizeBaseUrl, readConfig } from './config';

describe('readConfig', () => {
  it.each([
    ['plain origin', { apiBaseUrl: 'https://cp.example.com', analyticsAiChatEnabled: true }, { apiBaseUrl: 'https://cp.example.com', analyticsAiChatEnabled: true }],
    ['trailing /api', { apiBaseUrl: 'http://localhost:5009/api' }, { apiBaseUrl: 'http://localhost:5009', analyticsAiChatEnabled: false }],
    ['trailing slash', { apiBaseUrl: 'http://localhost:5009/', analyticsAiChatEnabled: false }, { apiBaseUrl: 'http://localhost:5009', analyticsAiChatEnabled: false }],
    ['path prefix kept', { apiBaseUrl: 'https://x.example/rxc/api/' }, { apiBaseUrl: 'https://x.example/rxc', analyticsAiChatEnabled: false }],
  ])('%s', (_name, input, want) => {
    expect(readConfig(input)).toEqual({ ok: true, config: want });
  });

  it.each([
    ['missing', undefined, /did not load/],
    ['not an object', 'http://x', /not an object/],
    ['no base url', { analyticsAiChatEnabled: true }, /no apiBaseUrl/],
    ['not a url', { apiBaseUrl: 'localhost:5009' }, /must be http or https|not a URL/],
    ['javascript scheme', { apiBaseUrl: 'javascript:alert(1)' }, /http or https/],
    ['flag as string', { apiBaseUrl: 'http://x', analyticsAiChatEnabled: 'true' }, /true or false/],
  ])('refuses %s', (_name, input, want) => {
    const got = readConfig(input);
    expect(got.ok).toBe(false);
    if (!got.ok) expect(got.error).toMatch(want);
  });

  it('reads window.__APP_CONFIG__ by default', () => {
    window.__APP_CONFIG__ = { apiBaseUrl: 'https://w.example/api', analyticsAiChatEnabled: true };
    expect(readConfig()).toEqual({ ok: true, config: { apiBaseUrl: 'https://w.example', analyticsAiChatEnabled: true } });
    delete window.__APP_CONFIG__;
  });

  it('does not strip an /api that is the host name', () => {
    expect(normalizeBaseUrl('http://api')).toBe('http://api');
  });
});
