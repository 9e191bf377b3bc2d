// Helpers for unit tests: a scripted fetch and the app rendered around a memory router.

import { render } from '@testing-library/react';
import { MemoryRouter } from 'react-router';
import { AppRoutes } from './App';
import { SessionProvider } from './auth/session';
import type { AppConfig } from './config';

export type Handler = (req: { method: string; url: URL; body: unknown; init: RequestInit }) => Response | Promise<Response>;

export interface FakeFetch {
  fetch: typeof fetch;
  calls: { method: string; url: URL; body: unknown; init: RequestInit }[];
}

export function fakeFetch(routes: Record<string, Handler>): FakeFetch {
  const calls: FakeFetch['calls'] = [];
  const fn = async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const url = new URL(String(input));
    const method = (init.method ?? 'GET').toUpperCase();
    const body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined;
    const call = { method, url, body, init };
    calls.push(call);
    const handler = routes[`${method} ${url.pathname}`];
    if (!handler) return problem(404, 'not_found', 'Not found');
    return handler(call);
  };
  return { fetch: fn as typeof fetch, calls };
}

export function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

export function problem(status: number, code: string, title: string, detail?: string): Response {
  return new Response(JSON.stringify({ type: 'about:blank', status, code, title, detail }), {
    status,
    headers: { 'Content-Type': 'application/problem+json' },
  });
}

export function html(status: number): Response {
  return new Response('<!doctype html><title>x</title>', { status, headers: { 'Content-Type': 'text/html' } });
}

export const BASE = 'http://api.test:5009';

/** The app at `path`, or at a location with history state (what Back restores). */
export function renderApp(path: string | { pathname: string; search?: string; state?: unknown }, f: FakeFetch, config: Partial<AppConfig> = {}) {
  const cfg: AppConfig = { apiBaseUrl: BASE, analyticsAiChatEnabled: false, ...config };
  return render(
    <MemoryRouter initialEntries={[path]}>
      <SessionProvider config={cfg} fetchFn={f.fetch}>
        <AppRoutes />
      </SessionProvider>
    </MemoryRouter>,
  );
}
