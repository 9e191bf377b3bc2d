// The production nginx config, run by Debian's nginx against the production build, with only
// paths and the port changed (see startNginx). Checks what browsers and caches rely on.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIST, request, startNginx } from './tools';
import type { Nginx, RawResponse } from './tools';

const API = 'https://cp.example.com:8443';
let nginx: Nginx;
const asset = (ext: string) => readdirSync(path.join(DIST, 'assets')).find((f) => f.endsWith(ext))!;

// Large enough to pass gzip_min_length; not part of the build.
const BIG_JSON = JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => ({ id: `sensor-${i}`, state: 'running' })) });
const BIG_SVG = `<svg xmlns="http://www.w3.org/2000/svg">${'<rect width="1" height="1"/>'.repeat(100)}</svg>`;

beforeAll(async () => {
  nginx = await startNginx({ apiBaseUrl: `${API}/api`, chat: true, extraFiles: { 'data.json': BIG_JSON, 'big.svg': BIG_SVG } });
});
afterAll(async () => {
  await nginx?.stop();
});

const get = (p: string, headers: Record<string, string> = {}, method = 'GET') => request(`${nginx.origin}${p}`, { headers, method });

function expectSecurityHeaders(res: RawResponse) {
  const csp = String(res.headers['content-security-policy'] ?? '');
  expect(csp).toContain("default-src 'self'");
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain(`connect-src 'self' ${API};`);
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).toContain("object-src 'none'");
  expect(res.headers['x-frame-options']).toBe('DENY');
  expect(res.headers['x-content-type-options']).toBe('nosniff');
  expect(res.headers['x-xss-protection']).toBe('0');
  expect(res.headers['server']).toBe('nginx');
}

describe('nginx', () => {
  it('serves the SPA at / with no-cache and every header', async () => {
    const res = await get('/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['cache-control']).toBe('no-cache');
    expect(res.body.toString()).toContain('<div id="root">');
    expectSecurityHeaders(res);
  });

  it.each(['/sensors', '/sensors/edge-1', '/tenants/acme?x=1', '/index.html', '/no/such/page'])('falls back to index.html for %s', async (p) => {
    const res = await get(p);
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe(readFileSync(path.join(DIST, 'index.html'), 'utf8'));
    expect(res.headers['cache-control']).toBe('no-cache');
    expectSecurityHeaders(res);
  });

  it.each(['.js', '.css'])('caches hashed %s assets for a year, immutable', async (ext) => {
    const res = await get(`/assets/${asset(ext)}`);
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(res.headers['content-type']).toMatch(ext === '.js' ? /javascript/ : /^text\/css/);
    expectSecurityHeaders(res);
  });

  it.each(['/assets/index-missing.js', '/assets/nope.css', '/assets/'])('answers 404 for a missing asset %s, never the SPA', async (p) => {
    const res = await get(p);
    expect(res.status).toBe(404);
    expect(res.body.toString()).not.toContain('<div id="root">');
    expect(res.headers['cache-control']).toBeUndefined();
    expectSecurityHeaders(res);
  });

  it('serves the runtime config from the writable folder, never cached', async () => {
    const res = await get('/config.js');
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['content-type']).toMatch(/javascript/);
    expect(res.body.toString()).toBe(`window.__APP_CONFIG__ = {"apiBaseUrl":"${API}","analyticsAiChatEnabled":true};\n`);
    expectSecurityHeaders(res);
  });

  it('answers /healthz', async () => {
    const res = await get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe('ok\n');
    expectSecurityHeaders(res);
  });

  it.each([
    ['POST to a file', '/index.html', 'POST', 405],
    ['POST to an asset', () => `/assets/${asset('.js')}`, 'POST', 405],
    ['TRACE', '/', 'TRACE', 405],
  ])('puts the headers on errors too: %s', async (_n, p, method, status) => {
    const res = await get(typeof p === 'function' ? p() : p, {}, method);
    expect(res.status).toBe(status);
    expectSecurityHeaders(res);
  });

  it('puts the headers on a 400', async () => {
    const res = await get('/', { Host: 'a b' });
    expect(res.status).toBe(400);
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['content-security-policy']).toContain("default-src 'self'");
  });

  it.each([
    ['HTML', '/', /^text\/html/],
    ['JavaScript', () => `/assets/${asset('.js')}`, /javascript/],
    ['CSS', () => `/assets/${asset('.css')}`, /^text\/css/],
    ['JSON', '/data.json', /^application\/json/],
    ['SVG', '/big.svg', /^image\/svg\+xml/],
  ])('gzips %s', async (_n, p, type) => {
    const url = typeof p === 'function' ? p() : p;
    const res = await get(url, { 'Accept-Encoding': 'gzip' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(type);
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(res.headers['vary']).toMatch(/Accept-Encoding/i);
    const plain = await get(url);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(zlib.gunzipSync(res.body).equals(plain.body)).toBe(true);
    expect(res.body.length).toBeLessThan(plain.body.length);
  });

  it('does not reveal its version', async () => {
    const res = await get('/assets/missing.js');
    expect(res.headers['server']).toBe('nginx');
    expect(res.body.toString()).not.toMatch(/nginx\/\d/);
  });

  it('logged no errors', () => {
    expect(nginx.errorLog()).not.toMatch(/\[(emerg|alert|crit)\]/);
  });
});
