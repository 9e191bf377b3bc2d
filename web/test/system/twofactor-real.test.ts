// Two-factor authentication in Chromium against the real control plane that with-rxc-dev.mjs runs
// (its operator secret key is set, so TOTP works): the admin creates an operator; that operator sets
// up TOTP on the account page (the key is shown once, a code from it turns TOTP on, ten recovery
// codes are shown once), then signs in with password and code, and with a recovery code, which a
// second time is refused. The codes are computed here as an authenticator app does (RFC 6238).
// Screenshots go to test-results/real-api/. Only the real-API run (make system-real) runs it.

import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRealApi, startApi } from './api';
import type { E2eApi } from './api';
import { atPhoneWidth, openBrowser } from './browser';
import { RESULTS, startNginx } from './tools';
import type { Nginx } from './tools';

const SHOTS = path.join(RESULTS, 'real-api');
const run = Date.now().toString(36);
const email = `totp-${run}@example.com`;
const password = `totp password ${run}`;

let api: E2eApi;
let nginx: Nginx;
let browser: { context: BrowserContext; page: Page; problems: string[] };
let origin: string;
let secret = '';
let recovery: string[] = [];
let enrolledStep = 0;

/** The page as it is, then at phone width: nothing may stick out sideways. */
async function shots(page: Page, name: string) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
  const overflow = await atPhoneWidth(page, path.join(SHOTS, `${name}-360.png`));
  expect(overflow, `${name}: the page scrolls sideways at 360 px`).toBeLessThanOrEqual(0);
}

function base32Decode(s: string): Buffer {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  const out: number[] = [];
  for (const c of s.replace(/=+$/, '').toUpperCase()) {
    value = (value << 5) | alphabet.indexOf(c);
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

const stepNow = () => Math.floor(Date.now() / 30_000);

function totp(key: string, step = stepNow()): string {
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(step));
  const mac = createHmac('sha1', base32Decode(key)).update(msg).digest();
  const off = mac[mac.length - 1] & 0x0f;
  return ((mac.readUInt32BE(off) & 0x7fffffff) % 1_000_000).toString().padStart(6, '0');
}

async function signInToCode(page: Page) {
  await page.context().clearCookies();
  await page.goto('/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByLabel('Code from your authenticator app').waitFor();
}

describe.skipIf(!isRealApi()).sequential('two-factor authentication against the real control plane', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    const port = Number(process.env.RXC_E2E_WEB_PORT ?? 8000);
    origin = `http://localhost:${port}`;
    api = await startApi({ origin, host: 'localhost', port });
    nginx = await startNginx({ apiBaseUrl: `${api.baseUrl}/api`, chat: false, port });
    // Wrong codes on purpose answer 401.
    browser = await openBrowser({ profile: 'chromium-totp', baseURL: origin, expected: /status of 401/ });
    // The operator, created through the API as a script would.
    const login = await fetch(`${api.baseUrl}/api/auth/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: api.email, password: api.password }),
    });
    expect(login.status).toBe(204);
    const cookie = /rxc_session=[^;]+/.exec(login.headers.get('set-cookie') ?? '')![0];
    const created = await fetch(`${api.baseUrl}/api/operators`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Cookie: cookie },
      body: JSON.stringify({ email, password, role: 'viewer', tenants: [] }),
    });
    expect(created.status).toBe(201);
  }, 60_000);

  afterAll(async () => {
    await browser?.context.close();
    await nginx?.stop();
    await api?.stop();
  });

  it('sets up TOTP on the account page and shows the recovery codes once', async () => {
    const { page } = browser;
    await page.goto('/login');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Sensors' }).waitFor();
    await page.goto('/account');
    await expect(page.getByTestId('totp-state').textContent()).resolves.toMatch(/^Off/);
    await page.getByRole('button', { name: 'Set up two-factor authentication' }).click();
    secret = (await page.getByTestId('totp-secret').textContent())!.trim();
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(await page.getByTestId('totp-url').getAttribute('href')).toContain(`secret=${secret}`);
    await shots(page, '40-totp-setup');
    await page.getByLabel('Code from the app').fill('000000');
    await page.getByRole('button', { name: 'Turn on' }).click();
    await page.getByRole('alert').filter({ hasText: 'That code is wrong' }).waitFor();
    enrolledStep = stepNow();
    await page.getByLabel('Code from the app').fill(totp(secret, enrolledStep));
    await page.getByRole('button', { name: 'Turn on' }).click();
    const list = page.getByRole('list', { name: 'Recovery codes' });
    await list.waitFor();
    recovery = (await list.getByRole('listitem').allTextContents()).map((c) => c.trim());
    expect(recovery).toHaveLength(10);
    await shots(page, '41-totp-recovery-codes');
    await page.getByRole('button', { name: 'I have saved them' }).click();
    await expect.poll(() => page.getByTestId('totp-state').textContent()).toMatch(/^On/);
  });

  it('asks for the code at sign-in and signs in with the current one', async () => {
    const { page } = browser;
    await signInToCode(page);
    await shots(page, '42-totp-sign-in');
    // The step used to turn TOTP on is spent: wait for the next code, as a person would.
    while (stepNow() <= enrolledStep) await new Promise((r) => setTimeout(r, 500));
    await page.getByLabel('Code from your authenticator app').fill(totp(secret));
    await page.getByRole('button', { name: 'Verify and sign in' }).click();
    await page.getByRole('heading', { name: 'Sensors' }).waitFor();
  }, 90_000);

  it('signs in once with a recovery code, and refuses it the second time', async () => {
    const { page } = browser;
    await signInToCode(page);
    await page.getByRole('button', { name: 'Use a recovery code instead' }).click();
    await page.getByLabel('Recovery code').fill(recovery[0]);
    await page.getByRole('button', { name: 'Verify and sign in' }).click();
    await page.getByRole('heading', { name: 'Sensors' }).waitFor();

    await signInToCode(page);
    await page.getByRole('button', { name: 'Use a recovery code instead' }).click();
    await page.getByLabel('Recovery code').fill(recovery[0]);
    await page.getByRole('button', { name: 'Verify and sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'That recovery code is wrong or was already used' }).waitFor();
  });

  it('ran without page errors or CSP violations', () => {
    expect(browser.problems).toEqual([]);
  });
});
