// Debian's Chromium driven by playwright-core, set up the same way for every browser test: a
// throwaway profile, the flags a sandbox-less headless run needs, and a list of the console
// errors and page errors the run saw (a CSP violation or a React error must fail a test).

import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';
import { requireTool, tempDir } from './tools';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Console errors not matching `expected`, and uncaught page errors, in order. */
  problems: string[];
}

export async function openBrowser(opts: {
  profile: string;
  baseURL: string;
  height?: number;
  /** Console errors the test provokes on purpose; 401s always are. */
  expected?: RegExp;
}): Promise<Browser> {
  requireTool(CHROMIUM);
  const context = await chromium.launchPersistentContext(tempDir(opts.profile), {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: opts.height ?? 900 },
    baseURL: opts.baseURL,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(10_000);
  const problems: string[] = [];
  const expected = opts.expected ?? /status of 401/;
  page.on('console', (m) => {
    if (m.type() === 'error' && !expected.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  return { context, page, problems };
}

/** Signs in on /login and waits for the Sensors screen. */
export async function signIn(page: Page, email: string, password: string) {
  await page.goto('/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Sensors' }).waitFor();
}

/** How far the page sticks out sideways at its current size (0 or less: it does not scroll sideways). */
export function horizontalOverflow(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
}

/**
 * How far the right edge of a table row's action (Revoke, Disable, …) lies beyond the window: a
 * table may scroll inside its own box at phone width, but its actions must stay in reach.
 */
export function actionsOverflow(page: Page): Promise<number> {
  return page.evaluate(() => {
    let worst = -Infinity;
    for (const el of Array.from(document.querySelectorAll('.table td.actions button, .table td.actions a'))) {
      const r = el.getBoundingClientRect();
      if (r.width > 0) worst = Math.max(worst, r.right - window.innerWidth);
    }
    return worst;
  });
}

/**
 * The page as it is at phone width (360 px): a full-page screenshot to `file`, and how far the page
 * or a table row's action sticks out sideways then (tables scroll inside their own box or become
 * cards, with their actions in reach; the page itself must not). The viewport is restored afterwards.
 */
export async function atPhoneWidth(page: Page, file: string): Promise<number> {
  const size = page.viewportSize()!;
  await page.setViewportSize({ width: 360, height: 780 });
  try {
    await page.waitForTimeout(100); // one layout pass; the screenshot waits for fonts itself
    await page.screenshot({ path: file, fullPage: true });
    return Math.max(await horizontalOverflow(page), await actionsOverflow(page));
  } finally {
    await page.setViewportSize(size);
  }
}
