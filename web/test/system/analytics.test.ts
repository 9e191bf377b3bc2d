// The Analytics screen and the chat in Chromium, served by the production nginx config, against
// the fake control plane in api.ts (chat-real.test.ts runs the chat against a real one).

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRealApi, startApi } from './api';
import type { E2eApi } from './api';
import { atPhoneWidth, openBrowser, signIn } from './browser';
import { freePort, RESULTS, startNginx } from './tools';
import type { Nginx } from './tools';


let api: E2eApi;
let nginx: Nginx;
let context: BrowserContext;
let page: Page;
let problems: string[];
const tenantId = `an-${Date.now().toString(36)}`;

async function shot(name: string) {
  await page.screenshot({ path: path.join(RESULTS, `${name}.png`), fullPage: true });
}

describe.skipIf(isRealApi())('analytics in Chromium', () => {
  beforeAll(async () => {
    mkdirSync(RESULTS, { recursive: true });
    const port = await freePort();
    const origin = `http://127.0.0.1:${port}`;
    api = await startApi({ origin, host: '127.0.0.1', port });
    api.seedTenant!(tenantId, 'Analytics Corp');
    nginx = await startNginx({ apiBaseUrl: `${api.baseUrl}/api`, chat: true, port });
    // A CSP violation (inline styles from the charts, say) or a React error fails the run.
    ({ context, page, problems } = await openBrowser({ profile: 'chromium-analytics', baseURL: origin }));
    await signIn(page, api.email, api.password);
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await nginx?.stop();
    await api?.stop();
  });

  it('renders the chart and the tables for a tenant', async () => {
    await page.getByRole('link', { name: 'Analytics' }).click();
    await page.getByRole('heading', { name: 'Analytics' }).waitFor();
    await page.getByLabel('Tenant').selectOption(tenantId);
    const chart = page.getByRole('figure', { name: 'Events and alerts over time' });
    await chart.waitFor();
    // Two drawn lines (events, alerts) with real geometry.
    await expect.poll(() => chart.locator('path.chart-line').count()).toBe(2);
    const d = await chart.locator('path.chart-line').first().getAttribute('d');
    expect(d?.length ?? 0).toBeGreaterThan(50);
    expect((await chart.locator('.chart-legend li').allTextContents()).sort()).toEqual(['Alerts', 'Events']);

    const sources = page.getByRole('table', { name: 'Top sources' });
    expect(await sources.locator('tbody td.mono').allTextContents()).toEqual(['203.0.113.7', '198.51.100.23']);
    await page.getByRole('table', { name: 'Top signatures' }).getByText('ET SCAN Potential SSH Scan').waitFor();
    await page.getByRole('table', { name: 'CVEs' }).getByText('CVE-2021-44228').waitFor();
    await page.getByRole('table', { name: 'Top destinations' }).getByText('10.0.0.5').waitFor();
    expect(new URL(page.url()).searchParams.get('tenantId')).toBe(tenantId);

    // Another range is another question, and stays in the URL for a reload.
    await page.getByLabel('Time range').selectOption('7d');
    await page.reload();
    await chart.waitFor();
    expect(await page.getByLabel('Time range').inputValue()).toBe('7d');
    await shot('analytics-01-overview');
    expect(await atPhoneWidth(page, path.join(RESULTS, 'analytics-01-overview-360.png')), 'analytics scrolls sideways at 360 px').toBeLessThanOrEqual(0);
    expect(problems).toEqual([]);
  });

  it('answers in the chat with a threat-intel chip for the known address only', async () => {
    await page.getByRole('button', { name: 'Ask analytics' }).click();
    const dialog = page.getByRole('dialog', { name: 'Analytics assistant' });
    await dialog.waitFor();
    expect(await dialog.getByLabel('Tenant').inputValue()).toBe(tenantId);
    await dialog.getByLabel('Question').fill('Which of these sources should I worry about?');
    await dialog.getByRole('button', { name: 'Ask', exact: true }).click();
    await dialog.getByText(/Answered by fake-llm-1/).waitFor({ timeout: 15_000 });
    await dialog.getByText(/203\.0\.113\.7 is a known scanner; block it at the edge\./).waitFor();
    const chips = dialog.getByRole('list', { name: 'Enrichment' }).getByRole('listitem');
    // The snapshot held 203.0.113.7 (known) and 198.51.100.23 (a miss): one threat-intel chip, and
    // the playbook; the historical chip is hidden because the status does not offer it.
    expect(await chips.allTextContents()).toEqual(['Known scanner 203.0.113.7', 'Scanner triage ET SCAN']);
    expect(await dialog.getByText('198.51.100.23').count()).toBe(0);
    await shot('analytics-02-chat-hit');
  });

  it('shows no chip for an address nobody knows', async () => {
    await page.getByRole('link', { name: 'Sensors' }).click();
    await page.getByRole('heading', { name: 'Sensors' }).waitFor();
    const dialog = page.getByRole('dialog', { name: 'Analytics assistant' });
    if (!(await dialog.isVisible())) await page.getByRole('button', { name: 'Ask analytics' }).click();
    await dialog.getByLabel('Tenant').selectOption(tenantId);
    await dialog.getByLabel('Question').fill('Is 198.51.100.23 a problem?');
    await dialog.getByRole('button', { name: 'Ask', exact: true }).click();
    await dialog.getByText(/nothing known about 198\.51\.100\.23; keep watching\./).waitFor({ timeout: 15_000 });
    const turns = dialog.locator('.turn');
    await expect.poll(() => turns.count()).toBe(2);
    expect(await turns.nth(1).getByRole('list', { name: 'Enrichment' }).count()).toBe(0);
    await shot('analytics-03-chat-miss');
    expect(problems).toEqual([]);
  });
});
