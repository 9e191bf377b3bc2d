// Roles in Chromium against the real control plane that with-rxc-dev.mjs runs (its first operator
// is an admin): the admin creates two tenants, a sensor in the first (the real sensor agent enrols
// with a claim code), and a viewer limited to that tenant; the viewer signs in in a browser of
// their own and sees only that tenant, its claim codes and sensor, and no action button anywhere;
// a page of the other tenant is not found for them. The admin's audit screen then shows both the
// creation of the viewer and the viewer's login. A stranger's repeated wrong logins end in
// 429 login_throttled, whose wait the login page shows, and in the audit trail. Screenshots at 1280 and 360 px go to
// test-results/real-api/. Only the real-API run (make system-real) runs it: roles are the control
// plane's, a fake would test itself.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRealApi, startApi } from './api';
import type { E2eApi } from './api';
import { atPhoneWidth, openBrowser, signIn } from './browser';
import { RESULTS, startNginx } from './tools';
import type { Nginx } from './tools';

const SHOTS = path.join(RESULTS, 'real-api');
const run = Date.now().toString(36);
const tenantA = `rbac-a-${run}`;
const tenantB = `rbac-b-${run}`;
const sensorName = `rbac-edge-${run}`;
const viewerEmail = `viewer-${run}@example.com`;
const viewerPassword = `viewer password ${run}`;

let api: E2eApi;
let nginx: Nginx;
let admin: { context: BrowserContext; page: Page; problems: string[] };
let viewer: { context: BrowserContext; page: Page; problems: string[] };
let origin: string;

async function shot(page: Page, name: string) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/** The same page at phone width, then back: nothing may stick out sideways. */
async function narrowShot(page: Page, name: string) {
  const overflow = await atPhoneWidth(page, path.join(SHOTS, `${name}.png`));
  expect(overflow, `${name}: the page scrolls sideways at 360 px`).toBeLessThanOrEqual(0);
}

async function createTenant(page: Page, id: string, name: string) {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Tenants' }).click();
  await page.getByRole('heading', { name: 'Tenants' }).waitFor();
  await page.getByLabel('ID').fill(id);
  await page.getByLabel('Name').fill(name);
  await page.getByRole('button', { name: 'Create tenant' }).click();
  await page.getByRole('table').getByRole('link', { name: id, exact: true }).waitFor();
}

describe.skipIf(!isRealApi()).sequential('roles against the real control plane', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // The control plane allows this origin only; its session cookie is SameSite=Lax, so page and
    // API share the host name localhost.
    const port = Number(process.env.RXC_E2E_WEB_PORT ?? 8000);
    origin = `http://localhost:${port}`;
    api = await startApi({ origin, host: 'localhost', port });
    nginx = await startNginx({ apiBaseUrl: `${api.baseUrl}/api`, chat: false, port });
    // The admin's page checks an API token by hand: a 404 for the tenant it does not grant and a
    // 401 once it is revoked are expected there. For the viewer, a page of a tenant they do not see
    // answers 404 on purpose.
    admin = await openBrowser({ profile: 'chromium-rbac-admin', baseURL: origin, expected: /status of (401|404)/ });
    viewer = await openBrowser({ profile: 'chromium-rbac-viewer', baseURL: origin, expected: /status of (401|404)/ });
    await admin.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  }, 60_000);

  afterAll(async () => {
    await admin?.context.close();
    await viewer?.context.close();
    await nginx?.stop();
    await api?.stop();
  });

  it('an admin sees the admin screens and creates two tenants and a sensor in the first', async () => {
    const { page } = admin;
    await signIn(page, api.email, api.password);
    await expect(page.getByTestId('my-role').textContent()).resolves.toBe('admin');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Operators' }).waitFor();
    await createTenant(page, tenantA, 'RBAC A');
    await createTenant(page, tenantB, 'RBAC B');

    await page.getByRole('table').getByRole('link', { name: tenantA, exact: true }).click();
    await page.getByRole('heading', { name: 'RBAC A' }).waitFor();
    // One code for the sensor, one that stays active (an admin could revoke it; a viewer may not).
    await page.getByLabel('Sensor name (optional)').fill(sensorName);
    await page.getByRole('button', { name: 'Issue claim code' }).click();
    const code = (await page.getByTestId('claim-code').textContent())!.trim();
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByLabel('Sensor name (optional)').fill('spare');
    await page.getByRole('button', { name: 'Issue claim code' }).click();
    await page.getByTestId('claim-code').waitFor();
    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByRole('row').filter({ hasText: 'spare' }).getByRole('button', { name: /^Revoke/ }).waitFor();
    await api.enrolSensor(code, sensorName);
    await page.goto(`/sensors?tenantId=${tenantA}`);
    await page.getByRole('link', { name: sensorName }).waitFor({ timeout: 30_000 });
    await page.getByRole('link', { name: sensorName }).click();
    await page.getByRole('group', { name: 'Sensor actions' }).getByRole('button', { name: 'Start' }).waitFor();
  });

  it('the admin creates a viewer limited to the first tenant', async () => {
    const { page } = admin;
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Operators' }).click();
    await page.getByRole('heading', { name: 'Operators' }).waitFor();
    await page.getByLabel('Email').fill(viewerEmail);
    await page.getByLabel('Initial password').fill(viewerPassword);
    await page.getByLabel('Role').selectOption('viewer');
    await page.getByLabel(`RBAC A (${tenantA})`).check();
    await page.getByRole('button', { name: 'Create operator' }).click();
    await page.getByText(`Operator ${viewerEmail} created as viewer`).waitFor();
    const row = page.getByRole('row').filter({ hasText: viewerEmail });
    await row.getByText(tenantA).waitFor();
    expect(await row.getByText(tenantB).count()).toBe(0);
    await shot(page, '20-operators');
    await narrowShot(page, '20-operators-360');
  });

  it('the viewer signs in and sees only that tenant, without action buttons', async () => {
    const { page } = viewer;
    await signIn(page, viewerEmail, viewerPassword);
    await expect(page.getByTestId('my-role').textContent()).resolves.toBe('viewer');
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await nav.getByRole('link', { name: 'Operators' }).count()).toBe(0);

    // Sensors: only the first tenant's sensor, only the first tenant in the filter.
    await page.getByRole('link', { name: sensorName }).waitFor({ timeout: 15_000 });
    const options = await page.getByLabel('Tenant').locator('option').allTextContents();
    expect(options).toEqual(['All tenants', `RBAC A (${tenantA})`]);
    // No selection, so no bulk Start or Stop.
    expect(await page.getByRole('checkbox').count()).toBe(0);
    expect(await page.getByRole('toolbar', { name: 'Bulk actions' }).count()).toBe(0);
    await shot(page, '21-viewer-sensors');

    // Tenants: one row, no creation form.
    await nav.getByRole('link', { name: 'Tenants' }).click();
    await page.getByRole('heading', { name: 'Tenants' }).waitFor();
    const table = page.getByRole('table', { name: 'Tenants' });
    await table.getByRole('link', { name: tenantA, exact: true }).waitFor();
    expect(await table.getByRole('link', { name: tenantB, exact: true }).count()).toBe(0);
    expect(await table.getByRole('row').count()).toBe(2); // header and tenant A
    expect(await page.getByRole('button', { name: 'Create tenant' }).count()).toBe(0);
    await shot(page, '22-viewer-tenants');
    await narrowShot(page, '22-viewer-tenants-360');

    // The tenant: its claim codes, no issue form and no Revoke although a code is active.
    await table.getByRole('link', { name: tenantA, exact: true }).click();
    await page.getByRole('heading', { name: 'RBAC A' }).waitFor();
    await page.getByRole('row').filter({ hasText: 'spare' }).getByText('active').waitFor();
    expect(await page.getByRole('button', { name: 'Issue claim code' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: /Revoke/ }).count()).toBe(0);
    await shot(page, '23-viewer-tenant');

    // The sensor: its details, no Start, Stop or Revoke.
    await page.goto(`/sensors?tenantId=${tenantA}`);
    await page.getByRole('link', { name: sensorName }).click();
    await page.getByRole('heading', { name: sensorName }).waitFor();
    await page.getByRole('heading', { name: 'Certificate' }).waitFor();
    expect(await page.getByRole('group', { name: 'Sensor actions' }).count()).toBe(0);
    for (const name of ['Start', 'Stop', 'Revoke']) expect(await page.getByRole('button', { name, exact: true }).count()).toBe(0);
    await shot(page, '24-viewer-sensor');
    await narrowShot(page, '24-viewer-sensor-360');

    // The other tenant, by address: not found, nothing of it shown.
    await page.goto(`/tenants/${tenantB}`);
    await page.getByText(`No tenant has the ID "${tenantB}".`).waitFor();
    expect(await page.getByText('RBAC B').count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Issue claim code' }).count()).toBe(0);

    // The operators screen, by address: not allowed.
    await page.goto('/operators');
    await page.getByRole('alert').filter({ hasText: 'Not allowed' }).waitFor();
    expect(await page.getByRole('button', { name: 'Create operator' }).count()).toBe(0);
  });

  it('the admin’s audit screen shows the viewer’s creation and login', async () => {
    const { page } = admin;
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit' }).click();
    await page.getByRole('heading', { name: 'Audit trail' }).waitFor();
    const table = page.getByRole('table', { name: 'Audit entries' });
    // Newest first: the viewer's login, then the creation by the admin.
    const login = table.getByRole('row').filter({ hasText: 'auth.login' }).filter({ hasText: viewerEmail });
    await login.first().waitFor();
    await login.first().getByText('success').waitFor();
    const created = table.getByRole('row').filter({ hasText: 'operator.create' });
    await created.first().waitFor();
    await expect(created.first().textContent()).resolves.toContain(api.email);
    await created.first().getByText('success').waitFor();
    await shot(page, '25-audit');
    await narrowShot(page, '25-audit-360');

    // Filtered by actor: the viewer's entries only.
    await page.getByLabel('Actor (email)').fill(viewerEmail);
    await page.getByLabel('Actor (email)').press('Enter');
    await page.waitForURL(/actor=/);
    // The list reloads after the URL changed: poll until only the viewer's entries are left.
    const column = (n: number) => table.locator(`tbody tr td:nth-child(${n})`).allTextContents();
    await expect
      .poll(async () => {
        const actors = await column(2);
        return actors.length > 0 && actors.every((a) => a.startsWith(viewerEmail));
      }, { timeout: 10_000 })
      .toBe(true);
    expect(await column(3)).toContain('auth.login');

    // Filtered by action: the creation, with the new operator as its target.
    await page.getByLabel('Actor (email)').fill('');
    await page.getByLabel('Actor (email)').press('Enter');
    await page.getByLabel('Action').selectOption('operator.create');
    await page.waitForURL((u) => u.searchParams.get('action') === 'operator.create' && !u.searchParams.has('actor'));
    await expect.poll(async () => [...new Set(await column(3))], { timeout: 10_000 }).toEqual(['operator.create']);
    expect((await column(5)).join(' ')).not.toBe('');
    await shot(page, '26-audit-filtered');
  });

  it('an operator can create an API token, see it once and revoke it', async () => {
    const { page } = admin;
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API tokens' }).click();
    await page.getByRole('heading', { name: 'API tokens' }).waitFor();
    await page.getByLabel('Name').fill(`e2e-${run}`);
    await page.getByLabel('Role').selectOption('viewer');
    await page.getByLabel(`RBAC A (${tenantA})`).check();
    await page.getByRole('button', { name: 'Create token' }).click();
    const token = (await page.getByTestId('api-token').textContent())!.trim();
    expect(token).toMatch(/^rxc_/);
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    await page.getByText('Copied to clipboard.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(token);
    await shot(page, '27-token-created');
    await narrowShot(page, '27-token-created-360');

    // The token works as a viewer of tenant A: it reads A, and B is not found.
    const seen = await page.evaluate(
      async ([base, tok, a, b]) => {
        const get = (p: string) => fetch(`${base}/api${p}`, { headers: { Authorization: `Bearer ${tok}` }, credentials: 'omit' }).then((r) => r.status);
        return [await get(`/tenants/${a}`), await get(`/tenants/${b}`)];
      },
      [api.baseUrl, token, tenantA, tenantB],
    );
    expect(seen).toEqual([200, 404]);

    await page.getByRole('button', { name: 'Done' }).click();
    expect(await page.getByText(token).count()).toBe(0);
    const row = page.getByRole('row').filter({ hasText: `e2e-${run}` });
    await row.getByRole('button', { name: /^Revoke/ }).click();
    await page.getByRole('dialog', { name: 'Revoke API token?' }).getByRole('button', { name: 'Revoke token' }).click();
    await row.getByText('revoked').waitFor();
    const after = await page.evaluate(
      async ([base, tok, a]) => (await fetch(`${base}/api/tenants/${a}`, { headers: { Authorization: `Bearer ${tok}` }, credentials: 'omit' })).status,
      [api.baseUrl, token, tenantA],
    );
    expect(after).toBe(401);
  });

  it('a throttled login shows the wait the control plane sends, and the audit trail shows the refusals', async () => {
    // An account nobody has: its failures hold back only itself (and count a few towards this
    // address's far higher limit).
    const stranger = `nobody-${run}@example.com`;
    const { context, page, problems } = await openBrowser({ profile: 'chromium-rbac-throttle', baseURL: origin, expected: /status of (401|429)/ });
    try {
      await page.goto('/login');
      await page.getByLabel('Email').fill(stranger);
      await page.getByLabel('Password').fill('not the password');
      const statuses: number[] = [];
      // From the fifth failure on, each one holds the account back for a delay that doubles.
      for (let i = 0; i < 12 && !statuses.includes(429); i++) {
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
        await expect.poll(() => page.getByRole('button', { name: 'Sign in' }).isEnabled()).toBe(true);
        const [res] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/api/auth/login')), page.getByRole('button', { name: 'Sign in' }).click()]);
        statuses.push(res.status());
      }
      expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
      expect(statuses.at(-1)).toBe(429);
      // The wait comes from Retry-After, which the control plane exposes to the console's origin.
      const alert = page.getByRole('alert').filter({ hasText: 'Too many failed sign-ins' });
      await expect(alert.textContent()).resolves.toMatch(/Try again in (\d+ s|\d+ min( \d+ s)?)\./);
      await expect(page.getByRole('button', { name: 'Sign in' }).isDisabled()).resolves.toBe(true);
      await shot(page, '28-login-throttled');
      await narrowShot(page, '28-login-throttled-360');
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }

    const { page: adminPage } = admin;
    await adminPage.goto(`/audit?actor=${encodeURIComponent(stranger)}&action=auth.login`);
    const rows = adminPage.getByRole('table', { name: 'Audit entries' }).locator('tbody tr');
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBeGreaterThanOrEqual(6);
    const outcomes = await rows.locator('td:nth-child(6)').allTextContents();
    expect(outcomes[0]).toMatch(/^denied429 · login_throttled$/i);
    expect(outcomes.at(-1)).toMatch(/^denied401 · invalid_credentials$/i);
    await shot(adminPage, '29-audit-throttled');
  });

  it('ran without page errors or CSP violations', () => {
    expect(admin.problems).toEqual([]);
    expect(viewer.problems).toEqual([]);
  });
});
