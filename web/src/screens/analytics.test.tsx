import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { Overview } from '../api/types';
import { fakeFetch, json, problem, renderApp } from '../test-utils';
import type { Handler } from '../test-utils';
import { rangeFor } from './Analytics';

const OVERVIEW: Overview = {
  tenantId: 'acme',
  from: '2026-11-20T10:00:00Z',
  to: '2026-11-20T11:00:00Z',
  bucketSeconds: 60,
  totals: { events: 1234, alerts: 56, sensors: 3 },
  series: [
    { t: '2026-11-20T10:00:00Z', events: 10, alerts: 1 },
    { t: '2026-11-20T10:01:00Z', events: 0, alerts: 0 },
    { t: '2026-11-20T10:02:00Z', events: 7, alerts: 2 },
  ],
  topSources: [
    { ip: '45.33.32.156', count: 40 },
    { ip: '10.0.0.5', count: 12 },
  ],
  topDestinations: [{ ip: '10.0.0.6', count: 33 }],
  topSignatures: [{ signatureId: 2001, signature: 'ET SCAN Nmap', category: 'Attempted Recon', severity: 2, count: 20 }],
  cves: [{ id: 'CVE-2021-44228', count: 4, lastSeen: '2026-11-20T10:30:00Z' }],
};

const TENANTS = { items: [{ id: 'acme', name: 'Acme', natsStatus: 'provisioned' }, { id: 'globex', name: 'Globex', natsStatus: 'provisioned' }] };

function routes(overview: Handler, extra: Record<string, Handler> = {}) {
  return fakeFetch({
    'GET /api/auth/me': () => json(200, { email: 'op@example.com' }),
    'GET /api/tenants': () => json(200, TENANTS),
    'GET /api/sensors': () => json(200, { items: [{ id: 's1', tenantId: 'acme', name: 'edge-1', state: 'running' }] }),
    'GET /api/analytics/overview': overview,
    ...extra,
  });
}

describe('analytics screen', () => {
  it('shows totals, the chart and the top tables of the first tenant', async () => {
    const f = routes(() => json(200, OVERVIEW));
    renderApp('/analytics', f);
    expect(await screen.findByText('1,234')).toBeInTheDocument();
    expect(screen.getByText('56')).toBeInTheDocument();
    expect(screen.getByRole('figure', { name: 'Events and alerts over time' })).toBeInTheDocument();
    const sources = screen.getByRole('table', { name: 'Top sources' });
    expect(within(sources).getAllByRole('row').map((r) => r.textContent)).toEqual(['AddressEvents', '45.33.32.15640', '10.0.0.512']);
    expect(within(screen.getByRole('table', { name: 'Top destinations' })).getByText('10.0.0.6')).toBeInTheDocument();
    expect(within(screen.getByRole('table', { name: 'Top signatures' })).getByText('ET SCAN Nmap')).toBeInTheDocument();
    expect(within(screen.getByRole('table', { name: 'CVEs' })).getByText('CVE-2021-44228')).toBeInTheDocument();
    const call = f.calls.find((c) => c.url.pathname === '/api/analytics/overview')!;
    expect(call.url.searchParams.get('tenantId')).toBe('acme');
    expect(call.url.searchParams.get('limit')).toBe('10');
    const from = Date.parse(call.url.searchParams.get('from')!);
    const to = Date.parse(call.url.searchParams.get('to')!);
    expect(to - from).toBe(24 * 3600_000);
    expect(screen.getByRole('link', { name: 'Analytics' })).toHaveAttribute('aria-current', 'page');
  });

  it('asks again when the range, tenant or sensor changes', async () => {
    const user = userEvent.setup();
    const f = routes(() => json(200, OVERVIEW));
    renderApp('/analytics?tenantId=acme', f);
    await screen.findByText('1,234');
    await user.selectOptions(screen.getByLabelText('Time range'), '7d');
    await waitFor(() => expect(f.calls.filter((c) => c.url.pathname === '/api/analytics/overview')).toHaveLength(2));
    let last = f.calls.filter((c) => c.url.pathname === '/api/analytics/overview').at(-1)!;
    expect(Date.parse(last.url.searchParams.get('to')!) - Date.parse(last.url.searchParams.get('from')!)).toBe(7 * 24 * 3600_000);
    await user.selectOptions(await screen.findByLabelText('Sensor'), 's1');
    await waitFor(() => expect(f.calls.filter((c) => c.url.pathname === '/api/analytics/overview')).toHaveLength(3));
    last = f.calls.filter((c) => c.url.pathname === '/api/analytics/overview').at(-1)!;
    expect(last.url.searchParams.get('sensorId')).toBe('s1');
    await user.selectOptions(screen.getByLabelText('Tenant'), 'globex');
    await waitFor(() => expect(f.calls.filter((c) => c.url.pathname === '/api/analytics/overview').at(-1)!.url.searchParams.get('tenantId')).toBe('globex'));
    expect(f.calls.filter((c) => c.url.pathname === '/api/analytics/overview').at(-1)!.url.searchParams.has('sensorId')).toBe(false);
  });

  it('says when there are no events', async () => {
    renderApp('/analytics', routes(() => json(200, { ...OVERVIEW, totals: { events: 0, alerts: 0, sensors: 0 }, topSources: [], topDestinations: [], topSignatures: [], cves: [] })));
    expect(await screen.findByText('No events for this tenant in this time range.')).toBeInTheDocument();
    expect(screen.queryByRole('figure')).toBeNull();
  });

  it('shows the problem when the overview fails, with a retry', async () => {
    let fail = true;
    const user = userEvent.setup();
    renderApp('/analytics', routes(() => (fail ? problem(503, 'events_unavailable', 'No stored events', 'event storage is not set up') : json(200, OVERVIEW))));
    const alert = await screen.findByRole('alert');
    expect(alert).toHaveTextContent('No stored events');
    expect(alert).toHaveTextContent('events_unavailable');
    fail = false;
    await user.click(within(alert).getByRole('button', { name: 'Retry' }));
    expect(await screen.findByText('1,234')).toBeInTheDocument();
  });

  it('says when there is no tenant yet', async () => {
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, { email: 'op@example.com' }),
      'GET /api/tenants': () => json(200, { items: [] }),
      'GET /api/analytics/overview': () => json(200, OVERVIEW),
    });
    renderApp('/analytics', f);
    expect(await screen.findByText(/No tenants yet/)).toBeInTheDocument();
    expect(f.calls.some((c) => c.url.pathname === '/api/analytics/overview')).toBe(false);
  });

  it('rounds ranges to the minute', () => {
    const r = rangeFor('1h', Date.parse('2026-11-20T10:00:30.123Z'));
    expect(r).toEqual({ from: '2026-11-20T09:01:00Z', to: '2026-11-20T10:01:00Z' });
  });
});

describe('chat on the analytics screen', () => {
  it('sends what the screen shows as the snapshot and shows the threat-intel chip', async () => {
    const user = userEvent.setup();
    const status = { enabled: true, model: 'llama3', capabilities: { threatIntel: true, historicalEnrichment: false, playbooks: false } };
    const f = routes(() => json(200, OVERVIEW), {
      'GET /api/analytics/chat/status': () => json(200, status),
      'POST /api/analytics/chat': () =>
        new Response(
          [
            ['enrichment', { kind: 'threatIntel', indicator: '45.33.32.156', title: 'Mass scanning campaign', detail: '1 MISP attribute' }],
            ['enrichment', { kind: 'historical', indicator: '45.33.32.156', title: 'Seen 40 times', detail: '' }],
            ['delta', { text: 'It is ' }],
            ['delta', { text: 'a scanner.' }],
            ['done', { model: 'llama3' }],
          ]
            .map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`)
            .join(''),
          { status: 200, headers: { 'Content-Type': 'text/event-stream' } },
        ),
    });
    renderApp('/analytics?tenantId=acme&sensorId=s1', f, { analyticsAiChatEnabled: true });
    await screen.findByText('1,234');
    await user.click(await screen.findByRole('button', { name: 'Ask analytics' }));
    await user.type(screen.getByLabelText('Question'), 'Who scans us?');
    await user.type(screen.getByLabelText('Context (optional)'), 'night shift');
    await user.click(screen.getByRole('button', { name: 'Ask' }));
    expect(await screen.findByText('It is a scanner.')).toBeInTheDocument();
    const chips = screen.getByRole('list', { name: 'Enrichment' });
    expect(within(chips).getAllByRole('listitem').map((c) => c.textContent)).toEqual(['Mass scanning campaign 45.33.32.156']);
    const sent = f.calls.find((c) => c.url.pathname === '/api/analytics/chat')!.body as { tenantId: string; snapshot: Record<string, unknown> };
    expect(sent.tenantId).toBe('acme');
    expect(sent.snapshot).toEqual({
      from: OVERVIEW.from,
      to: OVERVIEW.to,
      sensorId: 's1',
      topSources: OVERVIEW.topSources,
      topDestinations: OVERVIEW.topDestinations,
      topSignatures: OVERVIEW.topSignatures,
      cves: OVERVIEW.cves,
      text: 'night shift',
    });
  });
});
