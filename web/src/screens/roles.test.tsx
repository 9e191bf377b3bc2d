// Role awareness: what each role sees of the actions, per tenant, and how refusals read.

import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { Me } from '../api/types';
import { can, principalOf, sees } from '../auth/access';
import { fakeFetch, json, problem, renderApp } from '../test-utils';
import { holdMessage } from './Login';

const ADMIN: Me = { id: 'op-a', email: 'admin@example.com', role: 'admin', tenants: [] };
const OPERATOR: Me = { id: 'op-o', email: 'ops@example.com', role: 'operator', tenants: ['acme'] };
const VIEWER: Me = { id: 'op-v', email: 'view@example.com', role: 'viewer', tenants: ['acme'] };

const TENANTS = [
  { id: 'acme', name: 'Acme', natsStatus: 'provisioned' },
  { id: 'beta', name: 'Beta', natsStatus: 'provisioned' },
];

function fleet(me: Me, extra: Parameters<typeof fakeFetch>[0] = {}) {
  // Like the control plane: lists are filtered by membership.
  const visible = TENANTS.filter((t) => sees(me, t.id));
  return fakeFetch({
    'GET /api/auth/me': () => json(200, me),
    'GET /api/tenants': () => json(200, { items: visible }),
    'GET /api/tenants/acme/claim-codes': () => json(200, { items: [{ id: 'cc1', expiresAt: '2999-01-01T00:00:00Z', sensorName: 'edge-1' }] }),
    'GET /api/tenants/beta/claim-codes': () => json(200, { items: [{ id: 'cc2', expiresAt: '2999-01-01T00:00:00Z' }] }),
    'GET /api/sensors/s-acme': () => json(200, { id: 's-acme', tenantId: 'acme', name: 'edge-acme', state: 'stopped' }),
    'GET /api/sensors/s-beta': () => json(200, { id: 's-beta', tenantId: 'beta', name: 'edge-beta', state: 'stopped' }),
    'GET /api/sensors': () => json(200, { items: [] }),
    ...extra,
  });
}

describe('access rules mirror the control plane', () => {
  it.each([
    // principal, permission, tenant, allowed
    [ADMIN, 'admin', '', true],
    [ADMIN, 'operate', 'beta', true],
    [ADMIN, 'view', 'anything', true],
    [OPERATOR, 'operate', 'acme', true],
    [OPERATOR, 'operate', 'beta', false],
    [OPERATOR, 'view', 'beta', false],
    [OPERATOR, 'admin', '', false],
    [VIEWER, 'view', 'acme', true],
    [VIEWER, 'operate', 'acme', false],
    [VIEWER, 'view', 'beta', false],
    [VIEWER, 'admin', '', false],
  ] as const)('%o may %s on %j: %s', (me, perm, tenant, want) => {
    expect(can(me, perm, tenant)).toBe(want);
  });

  it('reads an unknown or missing role as viewer, never more', () => {
    expect(principalOf({ email: 'x@example.com' }).role).toBe('viewer');
    expect(principalOf({ email: 'x@example.com', role: 'superuser' as never, tenants: ['a'] })).toEqual({ id: '', email: 'x@example.com', role: 'viewer', tenants: ['a'] });
  });
});

describe('navigation', () => {
  it('shows Operators to admins only; API tokens and Audit to everyone', async () => {
    renderApp('/sensors', fleet(ADMIN));
    const nav = await screen.findByRole('navigation', { name: 'Main' });
    expect(within(nav).getByRole('link', { name: 'Operators' })).toHaveAttribute('href', '/operators');
    expect(screen.getByTestId('my-role')).toHaveTextContent('admin');
  });

  it.each([
    ['operator', OPERATOR],
    ['viewer', VIEWER],
  ])('hides Operators from a %s', async (_n, me) => {
    renderApp('/sensors', fleet(me));
    const nav = await screen.findByRole('navigation', { name: 'Main' });
    expect(within(nav).queryByRole('link', { name: 'Operators' })).toBeNull();
    expect(within(nav).getByRole('link', { name: 'API tokens' })).toBeInTheDocument();
    expect(within(nav).getByRole('link', { name: 'Audit' })).toBeInTheDocument();
    expect(screen.getByTestId('my-role')).toHaveTextContent(me.role);
  });

  it('answers a non-admin at /operators with not allowed and asks the API nothing about operators', async () => {
    const f = fleet(OPERATOR);
    renderApp('/operators', f);
    expect(await screen.findByRole('alert')).toHaveTextContent('Not allowed');
    expect(f.calls.some((c) => c.url.pathname === '/api/operators')).toBe(false);
  });
});

describe('action buttons by role and tenant', () => {
  it('offers tenant creation to admins only', async () => {
    renderApp('/tenants', fleet(ADMIN));
    expect(await screen.findByRole('button', { name: 'Create tenant' })).toBeInTheDocument();
  });

  it.each([
    ['operator', OPERATOR],
    ['viewer', VIEWER],
  ])('hides tenant creation from a %s, who sees only the granted tenant', async (_n, me) => {
    renderApp('/tenants', fleet(me));
    const table = await screen.findByRole('table', { name: 'Tenants' });
    expect(within(table).getByRole('link', { name: 'acme' })).toBeInTheDocument();
    expect(within(table).queryByRole('link', { name: 'beta' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Create tenant' })).toBeNull();
    expect(screen.queryByLabelText('ID')).toBeNull();
  });

  it('lets an operator issue and revoke claim codes on a granted tenant', async () => {
    renderApp('/tenants/acme', fleet(OPERATOR));
    expect(await screen.findByRole('button', { name: 'Revoke claim code cc1' })).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Issue claim code' })).toBeInTheDocument();
  });

  it('shows a viewer the claim codes without issue or revoke', async () => {
    renderApp('/tenants/acme', fleet(VIEWER));
    expect(await screen.findByText('cc1')).toBeInTheDocument();
    expect(screen.queryByRole('button', { name: /Revoke/ })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Issue claim code' })).toBeNull();
  });

  it('shows an operator no issue or revoke on a tenant not granted (whatever the API answered)', async () => {
    renderApp('/tenants/beta', fleet(OPERATOR));
    expect(await screen.findByText('cc2')).toBeInTheDocument();
    expect(screen.queryByRole('button', { name: /Revoke/ })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Issue claim code' })).toBeNull();
  });

  it('offers Start, Stop and Revoke to an operator of the sensor’s tenant', async () => {
    renderApp('/sensors/s-acme', fleet(OPERATOR));
    const group = await screen.findByRole('group', { name: 'Sensor actions' });
    expect(within(group).getAllByRole('button').map((b) => b.textContent)).toEqual(['Start', 'Stop', 'Revoke', 'Edit', 'Decommission']);
  });

  it.each([
    ['a viewer of the tenant', VIEWER, 's-acme', 'edge-acme'],
    ['an operator of another tenant', OPERATOR, 's-beta', 'edge-beta'],
  ])('hides Start, Stop and Revoke from %s', async (_n, me, id, name) => {
    renderApp(`/sensors/${id}`, fleet(me));
    expect(await screen.findByRole('heading', { name })).toBeInTheDocument();
    await screen.findByText('Sensor');
    expect(screen.queryByRole('group', { name: 'Sensor actions' })).toBeNull();
    for (const b of ['Start', 'Stop', 'Revoke', 'Edit', 'Decommission']) expect(screen.queryByRole('button', { name: b })).toBeNull();
  });
});

describe('refusals', () => {
  it('shows a 403 forbidden as not allowed, not as a generic failure', async () => {
    const user = userEvent.setup();
    // The grant changed after sign-in: the console still offers the action, the API refuses it.
    renderApp(
      '/tenants/acme',
      fleet(OPERATOR, { 'POST /api/tenants/acme/claim-codes': () => problem(403, 'forbidden', 'Forbidden', 'your role does not allow this action here') }),
    );
    await user.click(await screen.findByRole('button', { name: 'Issue claim code' }));
    const alert = await screen.findByRole('alert');
    expect(alert).toHaveTextContent('Not allowed');
    expect(alert).toHaveTextContent('Your role does not allow this action here');
    expect(alert).not.toHaveTextContent('Something went wrong');
  });

  it('shows a 403 forbidden inside a confirmation dialog as not allowed', async () => {
    const user = userEvent.setup();
    renderApp('/sensors/s-acme', fleet(OPERATOR, { 'POST /api/sensors/s-acme/commands': () => problem(403, 'forbidden', 'Forbidden') }));
    await user.click(await screen.findByRole('button', { name: 'Start' }));
    await user.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Start' }));
    expect(await within(screen.getByRole('dialog')).findByRole('alert')).toHaveTextContent(/^Not allowed: Your role does not allow/);
  });

  it('keeps an origin refusal (403 origin_not_allowed) as the API worded it', async () => {
    const user = userEvent.setup();
    renderApp('/tenants/acme', fleet(OPERATOR, { 'POST /api/tenants/acme/claim-codes': () => problem(403, 'origin_not_allowed', 'Origin not allowed', 'add it to CORS_ALLOWED_ORIGINS') }));
    await user.click(await screen.findByRole('button', { name: 'Issue claim code' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Origin not allowed add it to CORS_ALLOWED_ORIGINS');
  });
});

describe('login protection', () => {
  function loginWith(res: () => Response) {
    return fakeFetch({
      'GET /api/auth/me': () => problem(401, 'unauthenticated', 'Not logged in'),
      'POST /api/auth/login': res,
    });
  }

  async function submit() {
    const user = userEvent.setup();
    await user.type(await screen.findByLabelText('Email'), 'op@example.com');
    await user.type(screen.getByLabelText('Password'), 'guess');
    await user.click(screen.getByRole('button', { name: 'Sign in' }));
  }

  it('shows the wait of a 429 login_throttled and holds the button until then', async () => {
    const f = loginWith(() => {
      const r = problem(429, 'login_throttled', 'Too many failed logins');
      r.headers.set('Retry-After', '90');
      return r;
    });
    renderApp('/login', f);
    await submit();
    const alert = await screen.findByRole('alert');
    expect(alert).toHaveTextContent('Too many failed sign-ins for this account or from this address. Try again in 1 min 30 s.');
    expect(alert).not.toHaveTextContent('Email or password is wrong');
    expect(screen.getByRole('button', { name: 'Sign in' })).toBeDisabled();
    expect(f.calls.filter((c) => c.method === 'POST')).toHaveLength(1);
  });

  it('says so when the control plane is busy checking passwords (503 login_busy)', async () => {
    renderApp(
      '/login',
      loginWith(() => {
        const r = problem(503, 'login_busy', 'Too many logins at once');
        r.headers.set('Retry-After', '1');
        return r;
      }),
    );
    await submit();
    expect(await screen.findByRole('alert')).toHaveTextContent('The control plane is checking many sign-ins at once. Try again in 1 s.');
    // The hold is short: the button comes back by itself.
    await waitFor(() => expect(screen.getByRole('button', { name: 'Sign in' })).toBeEnabled(), { timeout: 4000 });
  });

  it('counts the wait down and words a missing Retry-After', () => {
    const now = 1_000_000;
    expect(holdMessage({ code: 'login_throttled', until: now + 5_000 }, now)).toMatch(/Try again in 5 s\.$/);
    expect(holdMessage({ code: 'login_throttled', until: now + 5_000 }, now + 4_200)).toMatch(/Try again in 1 s\.$/);
    expect(holdMessage({ code: 'login_throttled', until: now + 5_000 }, now + 5_000)).toMatch(/You can try again now\.$/);
    expect(holdMessage({ code: 'login_throttled', until: now + 120_000 }, now)).toMatch(/Try again in 2 min\.$/);
    expect(holdMessage({ code: 'login_throttled', until: null }, now)).toMatch(/Wait a while before you try again\.$/);
  });
});
