// The console in Chromium, served by the production nginx config, against the control plane
// returned by startApi() (a fake by default; see api.ts for a real one).

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRealApi, startApi } from './api';
import type { E2eApi } from './api';
import { atPhoneWidth, openBrowser } from './browser';
import { freePort, makeReadable, RESULTS, runHook, startNginx } from './tools';
import type { Nginx } from './tools';


let api: E2eApi;
let nginx: Nginx;
let context: BrowserContext;
let page: Page;
// The page's own origin: 127.0.0.1 with the fake, localhost with a real API (its session cookie
// is SameSite=Lax, so page and API must share the host name).
let webOrigin: string;
let problems: string[];
const tenantId = `e2e-${Date.now().toString(36)}`;
const sensorName = `edge-${Date.now().toString(36)}`;

// Each mode keeps its own screenshots: the real-API run must not overwrite the fake's.
const SHOTS = isRealApi() ? path.join(RESULTS, 'real-api') : RESULTS;

async function shot(name: string) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/** The page at 360 px too: it must not scroll sideways. */
async function narrow(name: string) {
  expect(await atPhoneWidth(page, path.join(SHOTS, `${name}-360.png`)), `${name} scrolls sideways at 360 px`).toBeLessThanOrEqual(0);
}

/** Rewrites /config.js through the hook, as a container restart with other variables would. */
/**
 * Opens /config.js until its Content-Security-Policy names origin: after nginx reloads, a worker of
 * the old configuration still answers once on a connection Chromium kept open (a console page
 * loaded that way would break the new CSP).
 */
async function awaitFreshCSP(origin: string) {
  for (let i = 0; ; i++) {
    const res = await page.goto('/config.js');
    if (res?.headers()['content-security-policy']?.includes(origin)) return;
    if (i >= 20) throw new Error(`the CSP does not name ${origin} after nginx reloaded`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function configure(chat: boolean, apiBaseUrl = `${api.baseUrl}/api`) {
  const r = runHook('busybox', {
    VITE_API_BASE_URL: apiBaseUrl,
    VITE_ANALYTICS_AI_CHAT_ENABLED: String(chat),
    RXC_CONFIG_DIR: nginx.configDir,
    RXC_LISTEN_PORT: String(nginx.port),
    RXC_IF_INET6: '/nonexistent',
  });
  if (r.status !== 0) throw new Error(r.stderr);
  // The hook wrote listen.conf for every address again; keep the test on loopback.
  const listen = path.join(nginx.configDir, 'listen.conf');
  writeFileSync(listen, readFileSync(listen, 'utf8').replace(`listen ${nginx.port};`, `listen 127.0.0.1:${nginx.port};`));
  makeReadable(nginx.configDir);
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  const port = isRealApi() ? Number(process.env.RXC_E2E_WEB_PORT ?? 8000) : await freePort();
  const host = isRealApi() ? 'localhost' : '127.0.0.1';
  webOrigin = `http://${host}:${port}`;
  api = await startApi({ origin: webOrigin, host, port });
  nginx = await startNginx({ apiBaseUrl: `${api.baseUrl}/api`, chat: false, port });
  // 401s and the refused connection of the unreachable-API test are expected; any other console
  // error (a CSP violation, a React error) is not.
  ({ context, page, problems } = await openBrowser({
    profile: 'chromium-profile',
    baseURL: webOrigin,
    height: 800,
    expected: /status of 401|ERR_CONNECTION_REFUSED/,
  }));
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: webOrigin });
}, 60_000);

afterAll(async () => {
  await context?.close();
  await nginx?.stop();
  await api?.stop();
});

describe.sequential('operator console in Chromium', () => {
  it('sends a deep link to login and back after signing in', async () => {
    await page.goto('/tenants');
    await page.getByLabel('Email').waitFor();
    expect(new URL(page.url()).pathname).toBe('/login');
    await shot('01-login');
    await narrow('01-login');
    await page.getByLabel('Email').fill(api.email);
    await page.getByLabel('Password').fill('wrong password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'Email or password is wrong' }).waitFor();
    await page.getByLabel('Password').fill(api.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Tenants' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/tenants');
  });

  it('creates a tenant, refusing a bad ID first', async () => {
    await page.getByLabel('ID').fill('bad id!');
    await page.getByLabel('Name').fill('E2E Corp');
    await page.getByRole('button', { name: 'Create tenant' }).click();
    await page.getByText('Use 1–64 letters').waitFor();
    await page.getByLabel('ID').fill(tenantId);
    await page.getByRole('button', { name: 'Create tenant' }).click();
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: tenantId, exact: true }) });
    await row.waitFor();
    // The NATS account is provisioned in the background; the list polls until it is.
    await row.getByText('provisioned').waitFor({ timeout: 15_000 });
    await shot('02-tenants');
  });

  it('issues a claim code shown once with copy and expiry', async () => {
    await page.getByRole('link', { name: tenantId, exact: true }).first().click();
    await page.getByRole('heading', { name: 'E2E Corp' }).waitFor();
    await page.getByLabel('Sensor name (optional)').fill(sensorName);
    await page.getByRole('button', { name: 'Issue claim code' }).click();
    const code = (await page.getByTestId('claim-code').textContent())!.trim();
    expect(code.length).toBeGreaterThan(5);
    await expect(page.getByText('This code is shown only once').isVisible()).resolves.toBe(true);
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByText('Copied to clipboard.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(code);
    await page.getByRole('row').filter({ hasText: sensorName }).getByText('active').waitFor();
    await shot('03-claim-code');
    await narrow('03-claim-code');
    await api.enrolSensor(code, sensorName);
  });

  it('shows the sensor appear in the live list without a reload', async () => {
    await page.getByRole('link', { name: 'View sensors' }).click();
    await page.getByRole('heading', { name: 'Sensors' }).waitFor();
    expect(new URL(page.url()).search).toBe(`?tenantId=${tenantId}`);
    await page.getByRole('link', { name: sensorName }).waitFor({ timeout: 15_000 });
    await shot('04-sensors');
    await narrow('04-sensors');
    // The system's dark mode darkens the page (fleet-real.test.ts checks the text and tables too).
    const background = () => page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);
    const light = await background();
    await page.emulateMedia({ colorScheme: 'dark' });
    expect(await background()).not.toBe(light);
    await shot('04-sensors-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    expect(await background()).toBe(light);
  });

  it('starts the sensor after confirmation and shows the acknowledgement', async () => {
    await page.getByRole('link', { name: sensorName }).click();
    await page.getByRole('heading', { name: sensorName }).waitFor();
    await page.getByRole('button', { name: 'Start' }).click();
    const dialog = page.getByRole('dialog', { name: 'Start sensor?' });
    await dialog.waitFor();
    expect(await dialog.getByRole('button', { name: 'Cancel' }).evaluate((el) => el === document.activeElement)).toBe(true);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Start' }).click();
    await dialog.getByRole('button', { name: 'Start' }).click();
    await page.getByText(/Start command sent/).waitFor();
    await page.locator('.page-head').getByText('running').waitFor({ timeout: 20_000 });
    await page.getByTestId('ack').locator('time').waitFor();
    await shot('05-sensor-running');
    await narrow('05-sensor-running');
  });

  it('keeps the page on refresh of a deep link', async () => {
    const url = page.url();
    expect(new URL(url).pathname).toMatch(/^\/sensors\/.+/);
    await page.reload();
    await page.getByRole('heading', { name: sensorName }).waitFor();
    await page.locator('.page-head').getByText('running').waitFor();
    expect(page.url()).toBe(url);
  });

  it('labels the sensor, filters by the label, lists batches and decommissions the sensor', async () => {
    // Labels: edited on the sensor, shown and filterable on the list.
    await page.getByRole('group', { name: 'Sensor actions' }).getByRole('button', { name: 'Edit' }).click();
    const form = page.getByRole('form', { name: 'Edit sensor' });
    await form.getByLabel('Labels').fill('site=ams role=edge');
    await form.getByRole('button', { name: 'Save' }).click();
    await page.getByText('Name and labels saved.').waitFor();
    await page.getByTestId('labels').getByText('site=ams').waitFor();
    await narrow('07-sensor-labels');
    await page.goto(`/sensors?tenantId=${tenantId}&labels=${encodeURIComponent('site=ams')}`);
    await page.getByRole('link', { name: sensorName }).waitFor({ timeout: 15_000 });
    await page.goto(`/sensors?tenantId=${tenantId}&labels=${encodeURIComponent('site=fra')}`);
    await page.getByText('No sensors match these filters.').waitFor({ timeout: 15_000 });
    await shot('07-sensors-by-label');
    // Batches: one Stop to the labelled sensors, confirmed with its exact count, then listed.
    await page.goto(`/sensors?tenantId=${tenantId}&labels=${encodeURIComponent('site=ams')}`);
    await page.getByRole('checkbox', { name: `Select ${sensorName}` }).check();
    await page.getByRole('toolbar', { name: 'Bulk actions' }).getByRole('button', { name: 'Stop' }).click();
    const confirmBatch = page.getByRole('dialog', { name: 'Stop 1 sensor?' });
    await confirmBatch.getByText('1 sensor gets the command now.').waitFor();
    await confirmBatch.getByRole('button', { name: 'Stop 1 sensor' }).click();
    await page.getByTestId('batch').waitFor();
    await page.getByRole('link', { name: 'Batches' }).click();
    await page.getByRole('heading', { name: 'Command batches' }).waitFor();
    await page.getByTestId('batch-outcome').first().waitFor();
    await shot('08-batches');
    await narrow('08-batches');
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot('08-batches-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    // Decommission: confirmed, then gone from the list. Not against the real stack: the sensor
    // agent rxc-dev runs would stop for good, and the files after this one use it.
    if (isRealApi()) return;
    await page.goto(`/sensors?tenantId=${tenantId}`);
    await page.getByRole('link', { name: sensorName }).click();
    await page.getByRole('group', { name: 'Sensor actions' }).getByRole('button', { name: 'Decommission' }).click();
    const dialog = page.getByRole('dialog', { name: 'Decommission sensor?' });
    await dialog.getByRole('button', { name: 'Decommission sensor' }).click();
    await page.getByRole('heading', { name: 'Sensors' }).waitFor();
    await page.goto(`/sensors?tenantId=${tenantId}`);
    await page.getByText('No sensors match these filters.').waitFor({ timeout: 15_000 });
  });

  it('shows the chat launcher only when the flag and the API status agree', async () => {
    const launcher = page.getByRole('button', { name: 'Ask analytics' });
    const statusSays = async () =>
      page.evaluate(async (base) => {
        const r = await fetch(`${base}/api/analytics/chat/status`, { credentials: 'include' });
        return r.ok && (await r.json()).enabled === true;
      }, api.baseUrl);

    // Flag off: no launcher, whatever the API says.
    await page.goto('/sensors');
    await page.getByRole('heading', { name: 'Sensors' }).waitFor();
    await page.waitForLoadState('networkidle');
    expect(await launcher.count()).toBe(0);

    configure(true);
    if (api.setChatEnabled) {
      api.setChatEnabled(false);
      await page.reload();
      await page.getByRole('heading', { name: 'Sensors' }).waitFor();
      await page.waitForLoadState('networkidle');
      expect(await launcher.count()).toBe(0);
      api.setChatEnabled(true);
    }

    await page.goto(`/sensors?tenantId=${tenantId}`);
    await page.getByRole('heading', { name: 'Sensors' }).waitFor();
    await page.waitForLoadState('networkidle');
    const enabled = await statusSays();
    expect(await launcher.count()).toBe(enabled ? 1 : 0);
    if (!enabled) return;

    await launcher.click();
    await page.getByRole('dialog', { name: 'Analytics assistant' }).waitFor();
    await page.getByLabel('Question').fill('What is 203.0.113.7 doing?');
    await page.getByRole('button', { name: 'Ask', exact: true }).click();
    await page.getByText(/Answered by/).waitFor({ timeout: 15_000 });
    if (!isRealApi()) {
      const chips = page.getByRole('list', { name: 'Enrichment' }).getByRole('listitem');
      expect(await chips.allTextContents()).toEqual(['Known scanner 203.0.113.7', 'Scanner triage ET SCAN']);
      await page.getByText(/block it at the edge\./).waitFor();
      // historicalEnrichment is false in the fake's status: no chip for it.
      expect(await page.getByText('Seen 12 times').count()).toBe(0);
    }
    await shot('06-chat');
    await narrow('06-chat');
    await page.keyboard.press('Escape');
    await launcher.waitFor();
  });

  it('says on the login page when the session has expired', async () => {
    await page.context().clearCookies();
    await page.getByRole('link', { name: 'Tenants' }).click();
    await page.getByText('Your session has expired').waitFor();
    expect(new URL(page.url()).pathname).toBe('/login');
    await shot('07-expired');
  });

  // The fake control plane offers SSO; the real one the demo stack runs has no identity provider.
  it.skipIf(isRealApi())('offers single sign-on on the login page when the control plane has it', async () => {
    const sso = page.getByRole('link', { name: 'Sign in with Example SSO' });
    await sso.waitFor();
    expect(await sso.getAttribute('href')).toBe(`${api.baseUrl}/api/auth/oidc/login`);
    await shot('07-sso-button');
    await narrow('07-sso-button');
  });

  it('says on the login page when the base URL is wrong or the API unreachable', async () => {
    // nginx itself answers /api/... with the SPA's HTML; its origin is 'self' for the CSP.
    configure(false, webOrigin);
    await page.goto('/sensors');
    await page.getByText(/Wrong API base URL/).waitFor();
    await shot('08-wrong-base-url');
    await narrow('08-wrong-base-url');

    const closed = `http://127.0.0.1:${await freePort()}`;
    configure(false, closed);
    await nginx.reload(); // the CSP's connect-src follows the new origin
    await awaitFreshCSP(closed);
    await page.goto('/sensors');
    await page.getByText(/control plane cannot be reached/).waitFor();
    expect(await page.getByText(closed).count()).toBeGreaterThan(0);

    configure(false);
    await nginx.reload();
    await awaitFreshCSP(new URL(api.baseUrl).origin);
  });

  it('ran without page errors or CSP violations', () => {
    expect(problems).toEqual([]);
  });
});
