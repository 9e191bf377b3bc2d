import { fireEvent, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { Sensor } from '../api/types';
import { fakeFetch, html, json, problem, renderApp } from '../test-utils';
import { tenantIdError } from './Tenants';
import { claimCodeState } from './TenantDetail';

const ME = { 'GET /api/auth/me': () => json(200, { id: 'op-1', email: 'op@example.com', role: 'admin', tenants: [] }) };

describe('login', () => {
  it('signs in and goes to the page that was asked for', async () => {
    const user = userEvent.setup();
    let signedIn = false;
    const f = fakeFetch({
      'GET /api/auth/me': () => (signedIn ? json(200, { email: 'op@example.com' }) : problem(401, 'unauthenticated', 'Not signed in')),
      'POST /api/auth/login': ({ body }) => {
        const b = body as { email: string; password: string };
        if (b.password !== 'right') return problem(401, 'invalid_credentials', 'Wrong email or password');
        signedIn = true;
        return new Response(null, { status: 204 });
      },
      'GET /api/tenants': () => json(200, { items: [] }),
    });
    renderApp('/tenants', f);
    const email = await screen.findByLabelText('Email');
    // The focus moves in an effect, which may run just after the field appears.
    await waitFor(() => expect(email).toHaveFocus());
    expect(screen.queryByRole('alert')).toBeNull();
    await user.type(email, 'op@example.com');
    await user.type(screen.getByLabelText('Password'), 'wrong');
    await user.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Email or password is wrong.');
    await user.clear(screen.getByLabelText('Password'));
    await user.type(screen.getByLabelText('Password'), 'right');
    await user.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByRole('heading', { name: 'Tenants' })).toBeInTheDocument();
    expect(screen.getByText('op@example.com')).toBeInTheDocument();
  });

  it.each([
    ['unreachable', () => Promise.reject(new TypeError('Failed to fetch')), /cannot be reached/],
    ['wrong base URL (HTML)', () => html(200), /Wrong API base URL/],
    ['wrong base URL (404)', () => new Response('not found', { status: 404 }), /Wrong API base URL/],
  ])('says why on the login page: %s', async (_n, me, want) => {
    renderApp('/sensors', fakeFetch({ 'GET /api/auth/me': me as never }));
    expect(await screen.findByRole('alert')).toHaveTextContent(want);
    expect(screen.getByRole('heading', { name: 'Sign in to the RXC console' })).toBeInTheDocument();
  });

  it('shows a database outage to a signed-in operator instead of the sign-in form, and resumes when it ends', async () => {
    let down = true;
    let asked = 0;
    const f = fakeFetch({
      'GET /api/auth/me': () => {
        asked++;
        if (!down) return json(200, { id: 'op-1', email: 'op@example.com', role: 'admin', tenants: [] });
        const r = problem(503, 'database_unavailable', 'Database unavailable', 'the database does not answer');
        r.headers.set('Retry-After', '2');
        return r;
      },
      'GET /api/sensors': () => json(200, { items: [] }),
      'GET /api/sensors/summary': () => json(200, { total: 0, byState: {} }),
      'GET /api/tenants': () => json(200, { items: [] }),
    });
    renderApp('/sensors', f);
    expect(await screen.findByRole('heading', { name: 'RXC is temporarily unavailable' })).toBeInTheDocument();
    expect(screen.getByRole('alert')).toHaveTextContent('the database does not answer');
    expect(screen.queryByLabelText('Email')).toBeNull();
    expect(screen.getByText(/Your session is kept/)).toBeInTheDocument();
    down = false;
    expect(await screen.findByRole('heading', { name: 'Sensors' }, { timeout: 4000 })).toBeInTheDocument();
    expect(asked).toBeGreaterThanOrEqual(2);
  });

  it('returns to login saying the session expired on any 401', async () => {
    const f = fakeFetch({
      ...ME,
      'GET /api/sensors': () => json(200, { items: [] }),
      'GET /api/tenants': () => problem(401, 'session_expired', 'Session expired'),
    });
    renderApp('/sensors', f);
    await screen.findByRole('heading', { name: 'Sensors' });
    // fireEvent: user-event lets jsdom follow the link as well, which jsdom cannot do.
    fireEvent.click(screen.getByRole('link', { name: 'Tenants' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Your session has expired');
    expect(screen.getByLabelText('Email')).toBeInTheDocument();
  });
});

describe('tenants', () => {
  it.each([
    ['acme', null],
    ['a', null],
    ['A1_b-c', null],
    ['x'.repeat(64), null],
    ['', /required/],
    ['-acme', /starting with/],
    ['acme corp', /letters/],
    ['acme.corp', /letters/],
    ['x'.repeat(65), /1–64/],
  ])('id %j', (id, want) => {
    const got = tenantIdError(id);
    if (want === null) expect(got).toBeNull();
    else expect(got).toMatch(want);
  });

  it('validates the id before sending and shows the new tenant', async () => {
    const user = userEvent.setup();
    const items: unknown[] = [];
    const f = fakeFetch({
      ...ME,
      'GET /api/tenants': () => json(200, { items }),
      'POST /api/tenants': ({ body }) => {
        const t = { ...(body as object), natsAccountPubKey: '', natsStatus: 'pending' };
        items.push(t);
        return json(201, t);
      },
    });
    renderApp('/tenants', f);
    await screen.findByText(/No tenants yet/);
    await user.type(screen.getByLabelText('ID'), 'bad id');
    await user.type(screen.getByLabelText('Name'), 'Acme');
    await user.click(screen.getByRole('button', { name: 'Create tenant' }));
    expect(screen.getByLabelText('ID')).toHaveAttribute('aria-invalid', 'true');
    expect(f.calls.filter((c) => c.method === 'POST')).toHaveLength(0);
    await user.clear(screen.getByLabelText('ID'));
    await user.type(screen.getByLabelText('ID'), 'acme');
    await user.click(screen.getByRole('button', { name: 'Create tenant' }));
    const table = await screen.findByRole('table', { name: 'Tenants' });
    expect(within(table).getByRole('link', { name: 'acme' })).toHaveAttribute('href', '/tenants/acme');
    expect(within(table).getByText('pending')).toBeInTheDocument();
  });

  it('shows a problem from the API', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      ...ME,
      'GET /api/tenants': () => json(200, { items: [] }),
      'POST /api/tenants': () => problem(409, 'tenant_exists', 'Tenant already exists', 'acme is taken'),
    });
    renderApp('/tenants', f);
    await user.type(await screen.findByLabelText('ID'), 'acme');
    await user.type(screen.getByLabelText('Name'), 'Acme');
    await user.click(screen.getByRole('button', { name: 'Create tenant' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Tenant already exists acme is taken');
  });
});

describe('claim codes', () => {
  it.each([
    [{ id: '1', expiresAt: '2999-01-01T00:00:00Z' }, 'active'],
    [{ id: '1', expiresAt: '2000-01-01T00:00:00Z' }, 'expired'],
    [{ id: '1', expiresAt: '2999-01-01T00:00:00Z', usedAt: '2020-01-01T00:00:00Z' }, 'used'],
    [{ id: '1', expiresAt: '2999-01-01T00:00:00Z', used: true, revoked: true }, 'revoked'],
  ])('state of %j is %s', (c, want) => expect(claimCodeState(c)).toBe(want));

  it('shows an issued code once with its expiry, and revokes with confirmation', async () => {
    const user = userEvent.setup();
    const codes: Record<string, unknown>[] = [];
    const f = fakeFetch({
      ...ME,
      'GET /api/tenants': () => json(200, { items: [{ id: 'acme', name: 'Acme Corp', natsStatus: 'provisioned' }] }),
      'GET /api/tenants/acme/claim-codes': () => json(200, { items: codes }),
      'POST /api/tenants/acme/claim-codes': ({ body }) => {
        codes.push({ id: 'cc1', expiresAt: '2999-01-01T00:00:00Z', sensorName: (body as { sensorName?: string }).sensorName });
        return json(201, { id: 'cc1', code: 'RXC-ABCD-EFGH', expiresAt: '2999-01-01T00:00:00Z' });
      },
      'DELETE /api/claim-codes/cc1': () => {
        codes[0].revokedAt = new Date().toISOString();
        return new Response(null, { status: 204 });
      },
    });
    renderApp('/tenants/acme', f);
    expect(await screen.findByRole('heading', { name: 'Acme Corp' })).toBeInTheDocument();
    await user.type(screen.getByLabelText('Sensor name (optional)'), 'edge-1');
    await user.click(screen.getByRole('button', { name: 'Issue claim code' }));
    expect(await screen.findByTestId('claim-code')).toHaveTextContent('RXC-ABCD-EFGH');
    expect(screen.getByText(/shown only once/)).toBeInTheDocument();
    expect(f.calls.find((c) => c.method === 'POST')!.body).toEqual({ ttlSeconds: 86400, sensorName: 'edge-1' });
    await user.click(screen.getByRole('button', { name: 'Copy' }));
    expect(await screen.findByText('Copied to clipboard.')).toBeInTheDocument();
    expect(await navigator.clipboard.readText()).toBe('RXC-ABCD-EFGH');

    const revoke = await screen.findByRole('button', { name: 'Revoke claim code cc1' });
    await user.click(revoke);
    const dialog = screen.getByRole('dialog', { name: 'Revoke claim code?' });
    expect(within(dialog).getByRole('button', { name: 'Cancel' })).toHaveFocus();
    await user.keyboard('{Escape}');
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(revoke).toHaveFocus();
    await user.click(revoke);
    await user.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Revoke code' }));
    expect(await screen.findByText(/revoked\. It can no longer be redeemed/)).toBeInTheDocument();
    expect(screen.queryByTestId('claim-code')).toBeNull();
    expect(f.calls.some((c) => c.method === 'DELETE')).toBe(true);
  });
});

describe('sensor detail', () => {
  it('shows certificate, last command and sends Start after confirmation', async () => {
    const user = userEvent.setup();
    const sensor: Sensor = {
      id: 's-1',
      tenantId: 'acme',
      name: 'edge-1',
      state: 'stopped',
      lastSeenAt: new Date().toISOString(),
      certificate: { serial: '0badc0ffee', notAfter: '2999-01-01T00:00:00Z' },
      lastCommand: null,
    };
    const f = fakeFetch({
      ...ME,
      'GET /api/sensors/s-1': () => json(200, sensor),
      'POST /api/sensors/s-1/commands': ({ body }) => {
        sensor.lastCommand = { commandId: 'cmd-9', action: (body as { action: string }).action, issuedAt: new Date().toISOString(), acknowledgedAt: null };
        return json(202, { commandId: 'cmd-9' });
      },
    });
    renderApp('/sensors/s-1', f);
    expect(await screen.findByText('0badc0ffee')).toBeInTheDocument();
    expect(screen.getByText('No command sent yet.')).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Stop' })).toBeDisabled();
    await user.click(screen.getByRole('button', { name: 'Start' }));
    const dialog = screen.getByRole('dialog', { name: 'Start sensor?' });
    // Tab stays inside the dialog.
    await user.tab();
    await user.tab();
    expect(dialog).toContainElement(document.activeElement as HTMLElement);
    await user.click(within(dialog).getByRole('button', { name: 'Start' }));
    expect(await screen.findByText(/Start command sent \(command cmd-9\)/)).toBeInTheDocument();
    expect(f.calls.find((c) => c.method === 'POST')!.body).toEqual({ action: 'start' });
    await waitFor(() => expect(screen.getByTestId('ack')).toHaveTextContent('waiting for the sensor'));
  });

  it('keeps the dialog open and says why when the command fails', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      ...ME,
      'GET /api/sensors/s-1': () => json(200, { id: 's-1', tenantId: 'acme', name: 'edge-1', state: 'running' }),
      'POST /api/sensors/s-1/revoke': () => problem(503, 'provisioner_unavailable', 'Provisioner unavailable', 'try again'),
    });
    renderApp('/sensors/s-1', f);
    await user.click(await screen.findByRole('button', { name: 'Revoke' }));
    await user.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Revoke sensor' }));
    expect(await within(screen.getByRole('dialog')).findByRole('alert')).toHaveTextContent('Provisioner unavailable: try again');
  });

  it('says when the sensor does not exist', async () => {
    renderApp('/sensors/nope', fakeFetch({ ...ME, 'GET /api/sensors/nope': () => problem(404, 'sensor_not_found', 'Sensor not found') }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Sensor not found');
  });
});

describe('sensors list', () => {
  it('filters by tenant and state through the query and the URL', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      ...ME,
      'GET /api/tenants': () => json(200, { items: [{ id: 'acme', name: 'Acme', natsStatus: 'provisioned' }, { id: 'beta', name: 'Beta', natsStatus: 'pending' }] }),
      'GET /api/sensors/summary': () => json(200, { total: 1, byState: { running: 1 } }),
      'GET /api/sensors': ({ url }) =>
        json(200, {
          items: [{ id: 's-1', tenantId: url.searchParams.get('tenantId') ?? 'acme', name: 'edge-1', state: url.searchParams.get('state') || 'running', lastSeenAt: null, certificate: null }],
        }),
    });
    renderApp('/sensors?tenantId=acme', f);
    expect(await screen.findByRole('link', { name: 'edge-1' })).toHaveAttribute('href', '/sensors/s-1');
    await waitFor(() => expect(screen.getByLabelText('Tenant')).toHaveValue('acme'));
    const sensorCalls = () => f.calls.filter((c) => c.url.pathname === '/api/sensors').map((c) => c.url.search);
    expect(sensorCalls()[0]).toBe('?tenantId=acme&sort=name&limit=50');
    await user.selectOptions(screen.getByLabelText('State'), 'offline');
    await waitFor(() => expect(sensorCalls()).toContain('?tenantId=acme&state=offline&sort=name&limit=50'));
    expect(await within(screen.getByRole('table', { name: 'Sensors' })).findByText('offline')).toBeInTheDocument();
    await user.selectOptions(screen.getByLabelText('Tenant'), '');
    await waitFor(() => expect(sensorCalls()).toContain('?state=offline&sort=name&limit=50'));
  });

  it('keeps the last list and says so when a refresh fails', async () => {
    let fail = false;
    const f = fakeFetch({
      ...ME,
      'GET /api/tenants': () => json(200, { items: [] }),
      'GET /api/sensors/summary': () => json(200, { total: 1, byState: { online: 1 } }),
      'GET /api/sensors': () => (fail ? Promise.reject(new TypeError('Failed to fetch')) : json(200, { items: [{ id: 's-1', tenantId: 'acme', name: 'edge-1', state: 'online' }] })),
    });
    renderApp('/sensors', f);
    await screen.findByRole('link', { name: 'edge-1' });
    fail = true;
    // The next poll fails: the table stays, with the cause above it.
    expect(await screen.findByText('Control plane unreachable', {}, { timeout: 5000 })).toBeInTheDocument();
    expect(screen.getByRole('link', { name: 'edge-1' })).toBeInTheDocument();
  });
});

describe('sign out', () => {
  it('ends the session and says so', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      ...ME,
      'GET /api/sensors': () => json(200, { items: [] }),
      'GET /api/tenants': () => json(200, { items: [] }),
      'POST /api/auth/logout': () => new Response(null, { status: 204 }),
    });
    renderApp('/sensors', f);
    await user.click(await screen.findByRole('button', { name: 'Sign out' }));
    expect(await screen.findByText('You are signed out.')).toBeInTheDocument();
    expect(f.calls.find((c) => c.url.pathname === '/api/auth/logout')!.init.credentials).toBe('include');
  });
});

