import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import { ApiError } from '../api/client';
import { fakeFetch, json, problem, renderApp } from '../test-utils';
import { chatAvailability, showsEnrichment } from './gating';

const ON = { enabled: true, model: 'llama3', capabilities: { threatIntel: true, historicalEnrichment: false, playbooks: true } };

describe('chatAvailability', () => {
  it.each([
    ['flag off, status on', false, async () => ON, false, 0],
    ['flag on, status on', true, async () => ON, true, 1],
    ['flag on, status off', true, async () => ({ enabled: false }), false, 1],
    ['flag on, status fails', true, async () => Promise.reject(new ApiError('problem', { status: 404, title: 'x' })), false, 1],
    ['flag on, status lies about enabled', true, async () => ({ enabled: 'yes' }), false, 1],
  ])('%s', async (_n, flag, status, want, calls) => {
    const chatStatus = vi.fn(status) as never;
    const got = await chatAvailability(flag, { chatStatus });
    expect(got.available).toBe(want);
    expect(chatStatus).toHaveBeenCalledTimes(calls);
  });

  it('shows an enrichment kind only with its capability', () => {
    expect(showsEnrichment(ON, 'threatIntel')).toBe(true);
    expect(showsEnrichment(ON, 'historical')).toBe(false);
    expect(showsEnrichment(ON, 'playbook')).toBe(true);
    expect(showsEnrichment(undefined, 'playbook')).toBe(false);
  });
});

function sse(events: [string, unknown][]): Response {
  const body = events.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`).join('');
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
}

function routes(status: unknown) {
  return fakeFetch({
    'GET /api/auth/me': () => json(200, { email: 'op@example.com' }),
    'GET /api/sensors': () => json(200, { items: [] }),
    'GET /api/tenants': () => json(200, { items: [{ id: 'acme', name: 'Acme', natsStatus: 'provisioned' }] }),
    'GET /api/analytics/chat/status': () => (status ? json(200, status) : problem(404, 'not_found', 'Not found')),
    'POST /api/analytics/chat': () =>
      sse([
        ['enrichment', { kind: 'threatIntel', indicator: '203.0.113.7', title: 'Known C2', detail: 'MISP event 42' }],
        ['enrichment', { kind: 'historical', indicator: '203.0.113.7', title: 'Seen 3 times', detail: '' }],
        ['delta', { text: 'This address ' }],
        ['delta', { text: 'is suspicious.' }],
        ['done', { model: 'llama3' }],
      ]),
  });
}

describe('chat launcher', () => {
  it.each([
    ['flag off', false, ON, false],
    ['status disabled', true, { enabled: false }, false],
    ['status missing', true, null, false],
    ['both on', true, ON, true],
  ])('%s', async (_n, flag, status, shown) => {
    const f = routes(status);
    renderApp('/sensors', f, { analyticsAiChatEnabled: flag });
    await screen.findByRole('heading', { name: 'Sensors' });
    if (shown) {
      expect(await screen.findByRole('button', { name: 'Ask analytics' })).toBeInTheDocument();
    } else {
      await waitFor(() => expect(f.calls.some((c) => c.url.pathname === '/api/sensors')).toBe(true));
      await new Promise((r) => setTimeout(r, 50));
      expect(screen.queryByRole('button', { name: 'Ask analytics' })).toBeNull();
    }
    expect(f.calls.some((c) => c.url.pathname === '/api/analytics/chat/status')).toBe(flag);
  });

  it('streams an answer with the chips its capabilities allow, and Escape closes', async () => {
    const user = userEvent.setup();
    const f = routes(ON);
    renderApp('/sensors?tenantId=acme', f, { analyticsAiChatEnabled: true });
    await user.click(await screen.findByRole('button', { name: 'Ask analytics' }));
    expect(await screen.findByRole('dialog', { name: 'Analytics assistant' })).toBeInTheDocument();
    expect(screen.getByLabelText('Question')).toHaveFocus();
    await waitFor(() => expect(screen.getByLabelText('Tenant', { selector: '#chat-tenant' })).toHaveValue('acme'));
    await user.type(screen.getByLabelText('Question'), 'Is 203.0.113.7 bad?');
    await user.click(screen.getByRole('button', { name: 'Ask' }));
    expect(await screen.findByText('This address is suspicious.')).toBeInTheDocument();
    expect(screen.getByText('Known C2')).toBeInTheDocument();
    expect(screen.queryByText('Seen 3 times')).toBeNull();
    expect(screen.getByText('Answered by llama3')).toBeInTheDocument();
    const sent = f.calls.find((c) => c.url.pathname === '/api/analytics/chat')!;
    // Away from the Analytics screen the snapshot is the last 24 hours and nothing else.
    expect(sent.body).toMatchObject({ tenantId: 'acme', question: 'Is 203.0.113.7 bad?', snapshot: { from: expect.any(String), to: expect.any(String) } });
    expect(Object.keys((sent.body as { snapshot: object }).snapshot).sort()).toEqual(['from', 'to']);
    await user.click(screen.getByLabelText('Question'));
    await user.keyboard('{Escape}');
    expect(screen.queryByRole('dialog', { name: 'Analytics assistant' })).toBeNull();
    await waitFor(() => expect(screen.getByRole('button', { name: 'Ask analytics' })).toHaveFocus());
  });
});
