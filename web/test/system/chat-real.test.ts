// The analytics chat in Chromium against the real control plane that with-rxc-dev.mjs runs, whose
// ANALYTICS_CHAT_* variables point at the fake model server and fake MISP of chat-fakes.mjs: the
// launcher shows (flag and status agree), a question whose snapshot holds the indicator MISP knows
// gets a threat-intel chip and the model's streamed answer, one about an unknown indicator no
// chip. Only the real-API run (make system-real) runs it; analytics.test.ts covers the fake API.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRealApi, startApi } from './api';
import type { E2eApi } from './api';
import { CHAT_MODEL, KNOWN_EVENT, KNOWN_INDICATOR, modelAnswer, UNKNOWN_INDICATOR } from './chat-fakes.mjs';
import { openBrowser, signIn } from './browser';
import { RESULTS, startNginx } from './tools';
import type { Nginx } from './tools';

const SHOTS = path.join(RESULTS, 'real-api');

let api: E2eApi;
let nginx: Nginx;
let context: BrowserContext;
let page: Page;
let problems: string[];
const tenantId = `chat-${Date.now().toString(36)}`;

async function shot(name: string) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

describe.skipIf(!isRealApi()).sequential('analytics chat against the real control plane', () => {
  beforeAll(async () => {
    if (!process.env.RXC_E2E_CHAT_FAKES) throw new Error('run through test/system/with-rxc-dev.mjs: it starts the fake model and MISP the control plane must use');
    mkdirSync(SHOTS, { recursive: true });
    // The control plane allows this origin only; its session cookie is SameSite=Lax, so page and API
    // share the host name localhost.
    const port = Number(process.env.RXC_E2E_WEB_PORT ?? 8000);
    const origin = `http://localhost:${port}`;
    api = await startApi({ origin, host: 'localhost', port });
    nginx = await startNginx({ apiBaseUrl: `${api.baseUrl}/api`, chat: true, port });
    ({ context, page, problems } = await openBrowser({ profile: 'chromium-chat-real', baseURL: origin }));
    await signIn(page, api.email, api.password);
    // The chat needs a tenant of the real control plane; create it as an operator would.
    await page.getByRole('link', { name: 'Tenants' }).click();
    await page.getByRole('heading', { name: 'Tenants' }).waitFor();
    await page.getByLabel('ID').fill(tenantId);
    await page.getByLabel('Name').fill('Chat Corp');
    await page.getByRole('button', { name: 'Create tenant' }).click();
    await page.getByRole('table').getByRole('link', { name: tenantId, exact: true }).waitFor();
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await nginx?.stop();
    await api?.stop();
  });

  it('shows the launcher: the flag is on and the control plane reaches its model', async () => {
    const status = await page.evaluate(async (base) => {
      const r = await fetch(`${base}/api/analytics/chat/status`, { credentials: 'include' });
      return r.json();
    }, api.baseUrl);
    expect(status).toMatchObject({ enabled: true, model: CHAT_MODEL, capabilities: { threatIntel: true } });

    await page.goto(`/analytics?tenantId=${tenantId}`);
    await page.getByRole('heading', { name: 'Analytics' }).waitFor();
    await page.getByText('No events for this tenant in this time range.').waitFor();
    await page.getByRole('button', { name: 'Ask analytics' }).waitFor();
  });

  it('streams the answer with a threat-intel chip for the indicator MISP knows', async () => {
    await page.getByRole('button', { name: 'Ask analytics' }).click();
    const dialog = page.getByRole('dialog', { name: 'Analytics assistant' });
    await dialog.waitFor();
    expect(await dialog.getByLabel('Tenant').inputValue()).toBe(tenantId);
    // The context field is the snapshot's free text, sent with the Analytics screen's view.
    await dialog.getByLabel('Context (optional)').fill(`Inbound SSH attempts from ${KNOWN_INDICATOR}`);
    await dialog.getByLabel('Question').fill('Should I block this source?');
    await dialog.getByRole('button', { name: 'Ask', exact: true }).click();

    const turn = dialog.locator('.turn').nth(0);
    await turn.getByText(`Answered by ${CHAT_MODEL}`).waitFor({ timeout: 20_000 });
    // The model's deltas, relayed as they came, and built from the MISP hit the control plane put
    // in its prompt.
    expect(await turn.locator('p.a').textContent()).toBe(modelAnswer(KNOWN_INDICATOR));
    const intel = turn.getByRole('list', { name: 'Enrichment' }).locator('li.chip-threatIntel');
    expect(await intel.allTextContents()).toEqual([`${KNOWN_EVENT} ${KNOWN_INDICATOR}`]);
    expect(await turn.getByRole('alert').count()).toBe(0);
    await shot('chat-real-01-hit');
  });

  it('shows no threat-intel chip for an indicator MISP does not know', async () => {
    const dialog = page.getByRole('dialog', { name: 'Analytics assistant' });
    await dialog.getByLabel('Context (optional)').fill(`One connection from ${UNKNOWN_INDICATOR}`);
    await dialog.getByLabel('Question').fill(`Is ${UNKNOWN_INDICATOR} a problem?`);
    await dialog.getByRole('button', { name: 'Ask', exact: true }).click();

    const turn = dialog.locator('.turn').nth(1);
    await turn.getByText(`Answered by ${CHAT_MODEL}`).waitFor({ timeout: 20_000 });
    expect(await turn.locator('p.a').textContent()).toBe(modelAnswer(null));
    expect(await turn.locator('li.chip-threatIntel').count()).toBe(0);
    expect(await turn.getByRole('alert').count()).toBe(0);
    await shot('chat-real-02-miss');
    expect(problems).toEqual([]);
  });
});
