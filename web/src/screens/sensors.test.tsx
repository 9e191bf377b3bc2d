// The sensor list at fleet scale against a fake that pages, filters, searches and sorts like the
// control plane: only the page shown and the summary are fetched, searching waits for a pause in
// typing, sort and paging follow the API's cursor, and a selection (by hand or "all matching")
// becomes one batch whose progress is followed to its end. Role gating of the bulk actions.

import { act, renderHook, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { BatchProgress, Me, Sensor } from '../api/types';
import { sees } from '../auth/access';
import { fakeFetch, json, problem, renderApp } from '../test-utils';
import { usePolling } from '../usePolling';
import { filterOf } from './Sensors';

const ADMIN: Me = { id: 'op-a', email: 'admin@example.com', role: 'admin', tenants: [] };
const OPERATOR: Me = { id: 'op-o', email: 'ops@example.com', role: 'operator', tenants: ['acme'] };
const VIEWER: Me = { id: 'op-v', email: 'view@example.com', role: 'viewer', tenants: ['acme', 'beta'] };
const STATES = ['running', 'stopped', 'offline'];

function makeFleet(n: number, tenantId: string): Sensor[] {
  return Array.from({ length: n }, (_, i) => {
    const k = String(i + 1).padStart(4, '0');
    return { id: `${tenantId}-${k}`, tenantId, name: `edge-${tenantId}-${k}`, hostname: `host-${k}.example.net`, agentVersion: '1.2.3', state: STATES[i % 3], lastSeenAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString() };
  });
}

/** A control plane's sensor routes over `all`, with keyset cursors and batches that progress per poll. */
function fleetApi(me: Me, all: Sensor[]) {
  const visible = () => all.filter((s) => sees(me, s.tenantId));
  const batches = new Map<string, BatchProgress>();
  const bodies: unknown[] = [];
  const match = (url: URL) => {
    const tenantId = url.searchParams.get('tenantId');
    const state = url.searchParams.get('state');
    const q = url.searchParams.get('q')?.toLowerCase();
    return visible().filter((s) => (!tenantId || s.tenantId === tenantId) && (!state || s.state === state) && (!q || [s.id, s.name, s.hostname ?? ''].some((v) => v.toLowerCase().includes(q))));
  };
  const f = fakeFetch({
    'GET /api/auth/me': () => json(200, me),
    'GET /api/tenants': () => json(200, { items: [{ id: 'acme', name: 'Acme', natsStatus: 'provisioned' }, { id: 'beta', name: 'Beta', natsStatus: 'provisioned' }].filter((t) => sees(me, t.id)) }),
    'GET /api/sensors/summary': ({ url }) => {
      const rows = match(new URL(`${url.origin}${url.pathname}?tenantId=${url.searchParams.get('tenantId') ?? ''}`));
      const byState: Record<string, number> = {};
      for (const s of rows) byState[s.state] = (byState[s.state] ?? 0) + 1;
      return json(200, { total: rows.length, byState });
    },
    'GET /api/sensors': ({ url }) => {
      const sort = url.searchParams.get('sort') ?? 'name';
      const desc = sort.startsWith('-');
      const field = ({ name: 'name', state: 'state', lastSeen: 'lastSeenAt' } as const)[desc ? sort.slice(1) : sort]!;
      const key = (s: Sensor) => `${s[field] ?? ''}\u0000${s.id}`;
      const rows = match(url).sort((a, b) => (desc ? -1 : 1) * key(a).localeCompare(key(b)));
      const limit = Number(url.searchParams.get('limit') ?? 50);
      const after = url.searchParams.get('cursor');
      if (after === 'stale') return problem(400, 'invalid_cursor', 'Invalid cursor', 'start again without one');
      const start = after ? rows.findIndex((s) => key(s) === after) + 1 : 0;
      const items = rows.slice(start, start + limit);
      const nextCursor = start + limit < rows.length ? key(items[items.length - 1]) : null;
      return json(200, { items, nextCursor });
    },
    'POST /api/commands': ({ body, url }) => {
      const b = body as { sensorIds?: string[]; filter?: { tenantId?: string; state?: string; q?: string } };
      const total = b.sensorIds ? b.sensorIds.length : match(new URL(`http://x/?${new URLSearchParams(b.filter as Record<string, string>)}`)).length;
      if (url.searchParams.get('dryRun') === 'true') return json(200, { matched: total + 2, total, skippedRevoked: 2, skippedNotEnrolled: 0 });
      bodies.push(body);
      const id = `batch-${bodies.length}`;
      batches.set(id, { total, accepted: 0, acknowledged: 0, failed: 0, pending: total, matched: total + 2, skippedRevoked: 2, skippedNotEnrolled: 0 });
      return json(202, { batchId: id, ...batches.get(id) });
    },
    'GET /api/commands/batches/batch-1': () => {
      // Each poll half of what is left is accepted, one fails; the last poll takes the rest. The
      // sensors acknowledge half of the accepted while some are pending, the rest a poll later.
      const p = batches.get('batch-1')!;
      const step = p.pending <= 2 ? p.pending : Math.ceil(p.pending / 2);
      const failed = p.failed === 0 && step > 0 ? 1 : 0;
      const next = { ...p, accepted: p.accepted + step - failed, failed: p.failed + failed, acknowledged: p.pending === 0 ? p.accepted : Math.floor((p.accepted + step - failed) / 2), pending: p.pending - step };
      batches.set('batch-1', next);
      return json(200, next);
    },
  });
  return { f, bodies, sensorCalls: () => f.calls.filter((c) => c.url.pathname === '/api/sensors').map((c) => c.url.searchParams) };
}

// Pages of 50 rows in jsdom are slow on a loaded machine: room beyond Vitest's 5 s default.
vi.setConfig({ testTimeout: 30_000 });

afterEach(() => vi.useRealTimers());

describe('sensors at fleet scale', () => {
  it('shows the first page and the summary, and pages forward and back with the API’s cursor', async () => {
    const user = userEvent.setup();
    const api = fleetApi(ADMIN, [...makeFleet(120, 'acme'), ...makeFleet(10, 'beta')]);
    renderApp('/sensors', api.f);
    const table = await screen.findByRole('table', { name: 'Sensors' });
    await waitFor(() => expect(within(table).getAllByRole('row')).toHaveLength(51));
    expect(within(table).getByRole('link', { name: 'edge-acme-0001' })).toHaveAttribute('href', '/sensors/acme-0001');
    expect(within(table).getByText('host-0001.example.net')).toBeInTheDocument();
    const summary = await screen.findByRole('list', { name: 'Sensors by state' });
    await waitFor(() => expect(within(summary).getByRole('button', { name: /130 all/ })).toHaveAttribute('aria-pressed', 'true'));
    expect(within(summary).getByRole('button', { name: /44 running/ })).toBeInTheDocument();
    expect(screen.getByTestId('page-range')).toHaveTextContent('1–50 of 130 · page 1');
    expect(api.sensorCalls()[0].toString()).toBe('sort=name&limit=50');

    await user.click(screen.getByRole('button', { name: 'Next' }));
    await waitFor(() => expect(screen.getByTestId('page-range')).toHaveTextContent('51–100 of 130 · page 2'));
    expect(api.sensorCalls().at(-1)!.get('cursor')).toBe(`edge-acme-0050\u0000acme-0050`);
    await user.click(screen.getByRole('button', { name: 'Next' }));
    await waitFor(() => expect(screen.getByTestId('page-range')).toHaveTextContent('101–130 of 130 · page 3'));
    expect(screen.getByRole('button', { name: 'Next' })).toBeDisabled();
    await user.click(screen.getByRole('button', { name: 'Previous' }));
    await waitFor(() => expect(screen.getByTestId('page-range')).toHaveTextContent('51–100 of 130 · page 2'));
    await user.click(screen.getByRole('button', { name: 'First' }));
    await waitFor(() => expect(screen.getByTestId('page-range')).toHaveTextContent('1–50 of 130 · page 1'));
    expect(api.sensorCalls().at(-1)!.has('cursor')).toBe(false);
    // Only pages and the summary were asked for: never the whole fleet.
    expect(api.sensorCalls().every((p) => p.get('limit') === '50')).toBe(true);
  }, 20_000);

  it('starts again at the first page when the API no longer takes the cursor', async () => {
    const api = fleetApi(ADMIN, makeFleet(60, 'acme'));
    renderApp({ pathname: '/sensors', state: { pages: { key: JSON.stringify([JSON.stringify(['', '', '', '{}']), 'name', 50]), cursors: ['stale'] } } }, api.f);
    await waitFor(() => expect(screen.getByTestId('page-range')).toHaveTextContent('1–50 of 60 · page 1'));
    expect(api.sensorCalls().map((p) => p.get('cursor'))).toEqual(['stale', null]);
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('filters by a state of the summary, and back to all', async () => {
    const user = userEvent.setup();
    const api = fleetApi(ADMIN, makeFleet(30, 'acme'));
    renderApp('/sensors', api.f);
    const summary = await screen.findByRole('list', { name: 'Sensors by state' });
    await user.click(await within(summary).findByRole('button', { name: /10 offline/ }));
    await waitFor(() => expect(api.sensorCalls().at(-1)!.get('state')).toBe('offline'));
    expect(screen.getByLabelText('State')).toHaveValue('offline');
    await waitFor(() => expect(screen.getByTestId('page-range')).toHaveTextContent('1–10 of 10'));
    await user.click(within(summary).getByRole('button', { name: /30 all/ }));
    await waitFor(() => expect(api.sensorCalls().at(-1)!.has('state')).toBe(false));
  });

  it('searches once the typing pauses, not per key, and says when nothing matches', async () => {
    const user = userEvent.setup();
    const api = fleetApi(ADMIN, makeFleet(60, 'acme'));
    renderApp('/sensors', api.f);
    await screen.findByRole('link', { name: 'edge-acme-0001' });
    await user.type(screen.getByLabelText('Search'), 'host-0042');
    await waitFor(() => expect(api.sensorCalls().at(-1)!.get('q')).toBe('host-0042'));
    const queries = api.sensorCalls().map((p) => p.get('q')).filter(Boolean);
    expect(queries).toEqual(['host-0042']);
    await waitFor(() => expect(within(screen.getByRole('table', { name: 'Sensors' })).getAllByRole('row')).toHaveLength(2));
    // A search's count is not known ahead: the range has no total.
    expect(screen.getByTestId('page-range')).toHaveTextContent(/^1–1 · page 1$/);
    await user.clear(screen.getByLabelText('Search'));
    await user.type(screen.getByLabelText('Search'), 'nothing-like-this{Enter}');
    expect(await screen.findByText('No sensors match these filters.')).toBeInTheDocument();
  });

  it('sorts by a column header, ascending then descending, and by the sort menu', async () => {
    const user = userEvent.setup();
    const api = fleetApi(ADMIN, makeFleet(5, 'acme'));
    renderApp('/sensors', api.f);
    const table = await screen.findByRole('table', { name: 'Sensors' });
    await within(table).findByRole('link', { name: 'edge-acme-0001' });
    const header = within(table).getByRole('columnheader', { name: /Last seen/ });
    expect(header).toHaveAttribute('aria-sort', 'none');
    await user.click(within(header).getByRole('button'));
    await waitFor(() => expect(api.sensorCalls().at(-1)!.get('sort')).toBe('lastSeen'));
    expect(within(table).getByRole('columnheader', { name: /Last seen/ })).toHaveAttribute('aria-sort', 'ascending');
    await user.click(within(within(table).getByRole('columnheader', { name: /Last seen/ })).getByRole('button'));
    await waitFor(() => expect(api.sensorCalls().at(-1)!.get('sort')).toBe('-lastSeen'));
    await waitFor(() => expect(within(table).getAllByRole('link', { name: /^edge-/ })[0]).toHaveTextContent('edge-acme-0005'));
    expect(screen.getByLabelText('Sort by')).toHaveValue('-lastSeen');
    await user.selectOptions(screen.getByLabelText('Sort by'), '-name');
    await waitFor(() => expect(api.sensorCalls().at(-1)!.get('sort')).toBe('-name'));
  });

  it('selects all matching and stops them as one batch, following its progress to the end', async () => {
    const user = userEvent.setup();
    const api = fleetApi(ADMIN, [...makeFleet(120, 'acme'), ...makeFleet(10, 'beta')]);
    renderApp('/sensors?tenantId=acme', api.f);
    await screen.findByRole('link', { name: 'edge-acme-0001' });
    await waitFor(() => expect(screen.getByTestId('page-range')).toHaveTextContent('of 120'));
    await user.click(screen.getByRole('checkbox', { name: 'Select all on this page' }));
    expect(screen.getByTestId('selected-count')).toHaveTextContent('50 selected');
    await user.click(screen.getByRole('button', { name: 'Select all 120 matching' }));
    expect(screen.getByTestId('selected-count')).toHaveTextContent('120 selected');
    await user.click(within(screen.getByRole('toolbar', { name: 'Bulk actions' })).getByRole('button', { name: 'Stop' }));
    const dialog = screen.getByRole('dialog', { name: 'Stop all 120 matching sensors?' });
    expect(dialog).toHaveTextContent('tenant acme');
    // The exact number and the skipped ones are stated before anything is sent.
    await waitFor(() => expect(within(dialog).getByTestId('batch-preview')).toHaveTextContent('120 sensors get the command now. 2 skipped: 2 revoked, 0 never enrolled'));
    expect(api.bodies).toEqual([]);
    await user.click(within(dialog).getByRole('button', { name: 'Stop 120 sensors' }));
    expect(api.bodies).toEqual([{ action: 'stop', filter: { tenantId: 'acme' } }]);

    const bar = await screen.findByRole('progressbar', { name: 'Batch progress' });
    expect(screen.getByRole('heading', { name: 'Stop sent to 120 sensors' })).toBeInTheDocument();
    await waitFor(() => expect(screen.getByTestId('batch')).toHaveAttribute('data-done', 'true'), { timeout: 15_000 });
    expect(bar).toHaveAttribute('aria-valuenow', '120');
    expect(bar).toHaveAttribute('aria-valuemax', '120');
    // Followed past "nothing pending" until every sensor answered: all 119 accepted acknowledged.
    expect(screen.getByText('Finished: not every sensor applied it.')).toBeInTheDocument();
    expect(screen.getByText('1 failed')).toBeInTheDocument();
    expect(screen.getByText('119 acknowledged by the sensor')).toBeInTheDocument();
    expect(screen.getByText('skipped (no command): 2 revoked, 0 never enrolled')).toBeInTheDocument();
    // Once over, the batch is no longer polled.
    const polls = api.f.calls.filter((c) => c.url.pathname.startsWith('/api/commands/batches/')).length;
    await new Promise((r) => setTimeout(r, 1500));
    expect(api.f.calls.filter((c) => c.url.pathname.startsWith('/api/commands/batches/')).length).toBeLessThanOrEqual(polls + 1);
    expect(screen.queryByRole('toolbar', { name: 'Bulk actions' })).toBeNull();
  }, 30_000);

  it('sends the sensors picked by hand, across pages, by their IDs', async () => {
    const user = userEvent.setup();
    const api = fleetApi(ADMIN, makeFleet(60, 'acme'));
    renderApp('/sensors', api.f);
    await user.click(await screen.findByRole('checkbox', { name: 'Select edge-acme-0002' }));
    await user.click(screen.getByRole('button', { name: 'Next' }));
    await user.click(await screen.findByRole('checkbox', { name: 'Select edge-acme-0055' }));
    expect(screen.getByTestId('selected-count')).toHaveTextContent('2 selected');
    await user.click(within(screen.getByRole('toolbar', { name: 'Bulk actions' })).getByRole('button', { name: 'Start' }));
    await user.click(within(screen.getByRole('dialog', { name: 'Start 2 sensors?' })).getByRole('button', { name: 'Start 2 sensors' }));
    await waitFor(() => expect(api.bodies).toEqual([{ action: 'start', sensorIds: ['acme-0002', 'acme-0055'] }]));
  });

  it('clears the selection when the filter changes', async () => {
    const user = userEvent.setup();
    const api = fleetApi(ADMIN, makeFleet(10, 'acme'));
    renderApp('/sensors', api.f);
    await user.click(await screen.findByRole('checkbox', { name: 'Select edge-acme-0001' }));
    expect(screen.getByTestId('selected-count')).toHaveTextContent('1 selected');
    await user.selectOptions(screen.getByLabelText('State'), 'running');
    await waitFor(() => expect(screen.queryByRole('toolbar', { name: 'Bulk actions' })).toBeNull());
  });

  it('says why a bulk command was refused and keeps the selection', async () => {
    const user = userEvent.setup();
    const api = fleetApi(ADMIN, makeFleet(3, 'acme'));
    const keys: string[] = [];
    renderApp('/sensors', {
      ...api.f,
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        if (!String(input).endsWith('/api/commands')) return api.f.fetch(input, init);
        keys.push((init?.headers as Record<string, string>)['Idempotency-Key']);
        return problem(503, 'messaging_unavailable', 'Messaging unavailable', 'try again');
      }) as typeof fetch,
    });
    await user.click(await screen.findByRole('checkbox', { name: 'Select edge-acme-0001' }));
    await user.click(within(screen.getByRole('toolbar', { name: 'Bulk actions' })).getByRole('button', { name: 'Stop' }));
    const dialog = screen.getByRole('dialog');
    await user.click(within(dialog).getByRole('button', { name: 'Stop 1 sensor' }));
    expect(await within(dialog).findByRole('alert')).toHaveTextContent('Messaging unavailable: try again');
    // Trying again from the same dialog is the same request: the same idempotency key.
    await user.click(within(dialog).getByRole('button', { name: 'Stop 1 sensor' }));
    await waitFor(() => expect(keys).toHaveLength(2));
    expect(keys[0]).toMatch(/^[0-9a-f]{32}$/);
    expect(keys[1]).toBe(keys[0]);
    await user.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    expect(screen.getByTestId('selected-count')).toHaveTextContent('1 selected');
    // A new dialog is a new request.
    await user.click(within(screen.getByRole('toolbar', { name: 'Bulk actions' })).getByRole('button', { name: 'Stop' }));
    await user.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Stop 1 sensor' }));
    await waitFor(() => expect(keys).toHaveLength(3));
    expect(keys[2]).not.toBe(keys[0]);
  });

  it('offers no selection or bulk action to a viewer', async () => {
    const api = fleetApi(VIEWER, makeFleet(60, 'acme'));
    renderApp('/sensors', api.f);
    await screen.findByRole('link', { name: 'edge-acme-0001' });
    expect(screen.queryAllByRole('checkbox')).toEqual([]);
    expect(screen.queryByRole('toolbar', { name: 'Bulk actions' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Start' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Stop' })).toBeNull();
  });

  it('lets an operator select only the sensors of their own tenants', async () => {
    // An API that (wrongly, or in a race with a grant change) lists another tenant's sensor.
    const api = fleetApi({ ...OPERATOR, tenants: ['acme', 'beta'] }, [...makeFleet(2, 'acme'), ...makeFleet(1, 'beta')]);
    const me = OPERATOR;
    renderApp('/sensors', { ...api.f, fetch: (async (input: RequestInfo | URL, init?: RequestInit) => (String(input).endsWith('/api/auth/me') ? json(200, me) : api.f.fetch(input, init))) as typeof fetch });
    await screen.findByRole('link', { name: 'edge-beta-0001' });
    expect(screen.getByRole('checkbox', { name: 'Select edge-acme-0001' })).toBeInTheDocument();
    expect(screen.queryByRole('checkbox', { name: 'Select edge-beta-0001' })).toBeNull();
  });

  it('filters a bulk command by what is set only', () => {
    expect(filterOf({ tenantId: 'acme', state: '', q: '' })).toEqual({ tenantId: 'acme' });
    expect(filterOf({ tenantId: '', state: 'running', q: 'fra' })).toEqual({ state: 'running', q: 'fra' });
  });
});

describe('polling', () => {
  function setHidden(hidden: boolean) {
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (hidden ? 'hidden' : 'visible') });
    document.dispatchEvent(new Event('visibilitychange'));
  }

  afterEach(() => setHidden(false));

  it('stops while the tab is hidden and loads at once when it is shown again', async () => {
    vi.useFakeTimers();
    const load = vi.fn(async () => 'v');
    renderHook(() => usePolling(load, [], 3000));
    await act(async () => {});
    expect(load).toHaveBeenCalledTimes(1);
    await act(async () => vi.advanceTimersByTime(3000));
    expect(load).toHaveBeenCalledTimes(2);
    setHidden(true);
    await act(async () => vi.advanceTimersByTime(3000));
    // The tick already due when it was hidden still runs; none after it.
    const whileHidden = load.mock.calls.length;
    await act(async () => vi.advanceTimersByTime(30_000));
    expect(load).toHaveBeenCalledTimes(whileHidden);
    await act(async () => setHidden(false));
    expect(load).toHaveBeenCalledTimes(whileHidden + 1);
    await act(async () => vi.advanceTimersByTime(3000));
    expect(load).toHaveBeenCalledTimes(whileHidden + 2);
  });

  it('keeps the data shown while new deps load when asked to', async () => {
    let resolve: (v: string) => void = () => {};
    const { result, rerender } = renderHook(({ k }) => usePolling(() => (k === 1 ? Promise.resolve('one') : new Promise<string>((r) => (resolve = r))), [k], null, { keepData: true }), {
      initialProps: { k: 1 },
    });
    await waitFor(() => expect(result.current.data).toBe('one'));
    rerender({ k: 2 });
    expect(result.current.data).toBe('one');
    expect(result.current.loading).toBe(true);
    await act(async () => resolve('two'));
    expect(result.current.data).toBe('two');
  });
});

describe('sensor detail at fleet scale', () => {
  it('shows hostname, agent version and address, links to its events, and pages its command history', async () => {
    const user = userEvent.setup();
    const sensor: Sensor = {
      id: 's-1',
      tenantId: 'acme',
      name: 'edge-1',
      hostname: 'ids-1.fra.example.net',
      agentVersion: 'v1.4.2',
      address: '198.51.100.7',
      state: 'running',
      lastSeenAt: new Date().toISOString(),
      certificate: { serial: '0badc0ffee', notAfter: '2999-01-01T00:00:00Z' },
      lastCommand: { commandId: 'cmd-25', action: 'start', issuedAt: '2026-01-02T00:00:00Z', acknowledgedAt: '2026-01-02T00:00:01Z' },
    };
    const history = Array.from({ length: 25 }, (_, i) => ({
      commandId: `cmd-${25 - i}`,
      action: i % 2 ? 'stop' : 'start',
      issuedAt: new Date(Date.UTC(2026, 0, 2, 0, 0, -i)).toISOString(),
      issuedBy: 'ops@example.com',
      expiresAt: '2999-01-01T00:00:00Z',
      status: i === 3 ? 'failed' : 'accepted',
      outcome: i === 5 ? 'refused' : null,
      outcomeReason: i === 5 ? 'engine_unavailable' : null,
      acknowledgedAt: i === 3 ? null : new Date(Date.UTC(2026, 0, 2, 0, 0, 1 - i)).toISOString(),
      failedAt: i === 3 ? '2026-01-02T00:00:00Z' : null,
    }));
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, ADMIN),
      'GET /api/sensors/s-1': () => json(200, sensor),
      'GET /api/sensors/s-1/commands': ({ url }) => {
        const start = Number(url.searchParams.get('cursor') ?? 0);
        const limit = Number(url.searchParams.get('limit'));
        return json(200, { items: history.slice(start, start + limit), nextCursor: start + limit < history.length ? String(start + limit) : null });
      },
      'POST /api/sensors/s-1/commands': () => {
        history.unshift({ ...history[0], commandId: 'cmd-26', action: 'stop', status: 'pending', acknowledgedAt: null, failedAt: null });
        sensor.lastCommand = { commandId: 'cmd-26', action: 'stop', issuedAt: new Date().toISOString(), acknowledgedAt: null };
        return json(202, { commandId: 'cmd-26' });
      },
    });
    renderApp('/sensors/s-1', f);
    expect(await screen.findByText('ids-1.fra.example.net')).toBeInTheDocument();
    expect(screen.getByText('v1.4.2')).toBeInTheDocument();
    expect(screen.getByText('198.51.100.7')).toBeInTheDocument();
    expect(screen.getByRole('link', { name: 'Events of this sensor' })).toHaveAttribute('href', '/analytics?tenantId=acme&sensorId=s-1');

    const table = await screen.findByRole('table', { name: 'Command history' });
    await waitFor(() => expect(within(table).getAllByRole('row')).toHaveLength(21));
    expect(within(table).getByText('cmd-22').closest('tr')).toHaveTextContent('failed');
    expect(within(table).getByText('cmd-20').closest('tr')).toHaveTextContent('refused by the sensor: engine_unavailable');
    await user.click(screen.getByRole('button', { name: 'Load more' }));
    await waitFor(() => expect(within(table).getAllByRole('row')).toHaveLength(26));
    expect(screen.getByText('25 commands; that is all.')).toBeInTheDocument();
    expect(f.calls.filter((c) => c.url.pathname === '/api/sensors/s-1/commands').map((c) => c.url.search)).toEqual(['?limit=20', '?limit=20&cursor=20']);

    // A new command shows up at the top once the sensor says it changed.
    await user.click(screen.getByRole('button', { name: 'Stop' }));
    await user.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Stop' }));
    await waitFor(() => expect(within(screen.getByRole('table', { name: 'Command history' })).getAllByRole('row')[1]).toHaveTextContent('cmd-26'), { timeout: 8000 });
    expect(within(screen.getByRole('table', { name: 'Command history' })).getAllByRole('row')[1]).toHaveTextContent('pending');
  }, 20_000);

  it('says so when no command was ever sent, and a failing history does not hide the sensor', async () => {
    renderApp(
      '/sensors/s-2',
      fakeFetch({
        'GET /api/auth/me': () => json(200, VIEWER),
        'GET /api/sensors/s-2': () => json(200, { id: 's-2', tenantId: 'acme', name: 'edge-2', state: 'pending', hostname: null }),
        'GET /api/sensors/s-2/commands': () => json(200, { items: [], nextCursor: null }),
      }),
    );
    expect(await screen.findAllByText('No command sent yet.')).not.toHaveLength(0);
    expect(screen.getAllByText('not reported')).toHaveLength(2);
    expect(screen.getByText('not known')).toBeInTheDocument();

    renderApp(
      '/sensors/s-3',
      fakeFetch({
        'GET /api/auth/me': () => json(200, VIEWER),
        'GET /api/sensors/s-3': () => json(200, { id: 's-3', tenantId: 'acme', name: 'edge-3', state: 'running' }),
        'GET /api/sensors/s-3/commands': () => problem(503, 'store_unavailable', 'Store unavailable'),
      }),
    );
    expect(await screen.findByRole('heading', { name: 'edge-3' })).toBeInTheDocument();
    expect(await screen.findByText('Store unavailable')).toBeInTheDocument();
  });
});

describe('claim code with the agent command', () => {
  it('shows the command that enrols a sensor with the new code, and copies it', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, ADMIN),
      'GET /api/tenants': () => json(200, { items: [{ id: 'acme', name: 'Acme', natsStatus: 'provisioned' }] }),
      'GET /api/tenants/acme/claim-codes': () => json(200, { items: [] }),
      'POST /api/tenants/acme/claim-codes': () => json(201, { id: 'cc1', code: 'RXC-ABCD-EFGH', expiresAt: '2999-01-01T00:00:00Z' }),
    });
    renderApp('/tenants/acme', f);
    await user.click(await screen.findByRole('button', { name: 'Issue claim code' }));
    const cmd = await screen.findByTestId('agent-command');
    expect(cmd).toHaveTextContent("RXC_CLAIM_CODE='RXC-ABCD-EFGH' sensor-agent run --api http://api.test:5009 --state-dir /var/lib/rxc-sensor");
    await user.click(screen.getByRole('button', { name: 'Copy command' }));
    expect(await screen.findByText('Command copied to clipboard.')).toBeInTheDocument();
    expect(await navigator.clipboard.readText()).toBe(cmd.textContent);
    await user.click(screen.getByRole('button', { name: 'Done' }));
    expect(screen.queryByTestId('agent-command')).toBeNull();
  });
});
