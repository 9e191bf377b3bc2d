// The Operators, API tokens and Audit screens.

import { fireEvent, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { ApiToken, AuditEntry, Me, Operator } from '../api/types';
import { fakeFetch, json, problem, renderApp } from '../test-utils';
import { passwordError } from './Operators';
import { tokenRoles, tokenState } from './Tokens';

const ADMIN: Me = { id: 'op-a', email: 'admin@example.com', role: 'admin', tenants: [] };
const OPERATOR: Me = { id: 'op-o', email: 'ops@example.com', role: 'operator', tenants: ['acme'] };
const TENANTS = [
  { id: 'acme', name: 'Acme', natsStatus: 'provisioned' },
  { id: 'beta', name: 'Beta', natsStatus: 'provisioned' },
];
const NOW = new Date().toISOString();

function operatorsApi() {
  const ops: Operator[] = [
    { id: 'op-a', email: 'admin@example.com', role: 'admin', tenants: [], disabled: false, createdAt: NOW },
    { id: 'op-o', email: 'ops@example.com', role: 'operator', tenants: ['acme'], disabled: false, createdAt: NOW },
  ];
  const f = fakeFetch({
    'GET /api/auth/me': () => json(200, ADMIN),
    'GET /api/tenants': () => json(200, { items: TENANTS }),
    'GET /api/operators': () => json(200, { items: ops }),
    'POST /api/operators': ({ body }) => {
      const b = body as { email: string; role: Operator['role']; tenants: string[] };
      if (ops.some((o) => o.email === b.email)) return problem(409, 'conflict', 'Conflict', 'operator exists');
      const o: Operator = { id: `op-${ops.length}`, email: b.email, role: b.role, tenants: b.tenants, disabled: false, createdAt: NOW };
      ops.push(o);
      return json(201, o);
    },
    'PATCH /api/operators/op-a': () => problem(409, 'last_admin', 'Last admin', 'the last enabled admin cannot be demoted or disabled'),
    'PATCH /api/operators/op-o': ({ body }) => {
      const o = ops[1];
      Object.assign(o, body);
      return json(200, o);
    },
    'POST /api/operators/op-o/password': () => new Response(null, { status: 204 }),
    'POST /api/operators/op-o/sign-out': () => json(200, { sessions: 3 }),
  });
  return { f, ops };
}

/** The operators table's row whose first cell starts with email. */
function rowOf(table: HTMLElement, email: string): HTMLTableRowElement {
  const row = within(table)
    .getAllByRole('row')
    .find((r) => (r as HTMLTableRowElement).cells[0]?.textContent?.startsWith(email));
  if (!row) throw new Error(`no row for ${email}`);
  return row as HTMLTableRowElement;
}

describe('operators screen', () => {
  it('lists operators with role, tenants and state', async () => {
    const { f } = operatorsApi();
    renderApp('/operators', f);
    const table = await screen.findByRole('table', { name: 'Operators' });
    const row = rowOf(table, 'ops@example.com');
    expect(within(row).getByText('operator')).toBeInTheDocument();
    expect(within(row).getByText('acme')).toBeInTheDocument();
    expect(within(row).getByText('enabled')).toBeInTheDocument();
    const me = rowOf(table, 'admin@example.com');
    expect(within(me).getByText('(you)')).toBeInTheDocument();
    expect(within(me).getByText('all tenants')).toBeInTheDocument();
    // One's own password needs the current one: the Account screen, not a reset.
    expect(within(me).getByRole('link', { name: /Change password/ })).toHaveAttribute('href', '/account');
    expect(within(me).queryByRole('button', { name: /Reset password/ })).toBeNull();
    expect(within(row).getByRole('button', { name: 'Reset password of ops@example.com' })).toBeInTheDocument();
  });

  it('creates an operator with role and tenants, checking the password length first', async () => {
    const user = userEvent.setup();
    const { f } = operatorsApi();
    renderApp('/operators', f);
    await screen.findByRole('table', { name: 'Operators' });
    await user.type(screen.getByLabelText('Email'), 'new@example.com');
    await user.type(screen.getByLabelText('Initial password'), 'short');
    await user.click(screen.getByRole('button', { name: 'Create operator' }));
    expect(screen.getByText('At least 12 characters.')).toBeInTheDocument();
    expect(f.calls.filter((c) => c.method === 'POST')).toHaveLength(0);
    await user.type(screen.getByLabelText('Initial password'), ' and longer now');
    expect(screen.getByLabelText('Role')).toHaveValue('viewer');
    await user.click(screen.getByLabelText('Beta (beta)'));
    await user.click(screen.getByRole('button', { name: 'Create operator' }));
    expect(await screen.findByText(/Operator new@example.com created as viewer/)).toBeInTheDocument();
    expect(f.calls.find((c) => c.method === 'POST')!.body).toEqual({ email: 'new@example.com', password: 'short and longer now', role: 'viewer', tenants: ['beta'] });
    await waitFor(() => expect(rowOf(screen.getByRole('table', { name: 'Operators' }), 'new@example.com')).toHaveTextContent('beta'));
  });

  it('sends no tenants for an admin (who sees them all)', async () => {
    const user = userEvent.setup();
    const { f } = operatorsApi();
    renderApp('/operators', f);
    await screen.findByRole('table', { name: 'Operators' });
    await user.type(screen.getByLabelText('Email'), 'boss@example.com');
    await user.type(screen.getByLabelText('Initial password'), 'long enough password');
    await user.click(screen.getByLabelText('Acme (acme)'));
    await user.selectOptions(screen.getByLabelText('Role'), 'admin');
    expect(screen.queryByLabelText('Acme (acme)')).toBeNull();
    await user.click(screen.getByRole('button', { name: 'Create operator' }));
    await screen.findByText(/created as admin/);
    expect((f.calls.find((c) => c.method === 'POST')!.body as { tenants: string[] }).tenants).toEqual([]);
  });

  it('changes role and tenants', async () => {
    const user = userEvent.setup();
    const { f } = operatorsApi();
    renderApp('/operators', f);
    await user.click(await screen.findByRole('button', { name: 'Edit ops@example.com' }));
    const dialog = screen.getByRole('dialog', { name: 'Role and tenants of ops@example.com' });
    expect(within(dialog).getByLabelText('Acme (acme)')).toBeChecked();
    await user.selectOptions(within(dialog).getByLabelText('Role'), 'viewer');
    await user.click(within(dialog).getByLabelText('Beta (beta)'));
    await user.click(within(dialog).getByRole('button', { name: 'Save' }));
    expect(await screen.findByText('ops@example.com is now viewer on acme, beta.')).toBeInTheDocument();
    expect(f.calls.find((c) => c.method === 'PATCH')!.body).toEqual({ role: 'viewer', tenants: ['acme', 'beta'] });
  });

  it('says clearly that the last admin cannot be demoted, and keeps the dialog open', async () => {
    const user = userEvent.setup();
    const { f } = operatorsApi();
    renderApp('/operators', f);
    await user.click(await screen.findByRole('button', { name: 'Edit admin@example.com' }));
    const dialog = screen.getByRole('dialog');
    await user.selectOptions(within(dialog).getByLabelText('Role'), 'operator');
    await user.click(within(dialog).getByRole('button', { name: 'Save' }));
    expect(await within(dialog).findByRole('alert')).toHaveTextContent(
      'Last admin: This is the last enabled admin: it cannot be demoted or disabled. Make another operator admin first.',
    );
    expect(screen.getByRole('dialog')).toBeInTheDocument();
  });

  it('refuses to disable the last admin the same way', async () => {
    const user = userEvent.setup();
    const { f } = operatorsApi();
    renderApp('/operators', f);
    await user.click(await screen.findByRole('button', { name: 'Disable admin@example.com' }));
    await user.click(within(screen.getByRole('dialog', { name: 'Disable operator?' })).getByRole('button', { name: 'Disable' }));
    expect(await within(screen.getByRole('dialog')).findByRole('alert')).toHaveTextContent('This is the last enabled admin');
  });

  it('disables and enables an operator', async () => {
    const user = userEvent.setup();
    const { f } = operatorsApi();
    renderApp('/operators', f);
    await user.click(await screen.findByRole('button', { name: 'Disable ops@example.com' }));
    await user.click(within(screen.getByRole('dialog', { name: 'Disable operator?' })).getByRole('button', { name: 'Disable' }));
    expect(await screen.findByText(/ops@example.com disabled: signed out everywhere/)).toBeInTheDocument();
    const row = (await screen.findByRole('button', { name: 'Enable ops@example.com' })).closest('tr')!;
    expect(within(row).getByText('disabled')).toBeInTheDocument();
    await user.click(within(row).getByRole('button', { name: 'Enable ops@example.com' }));
    await user.click(within(screen.getByRole('dialog', { name: 'Enable operator?' })).getByRole('button', { name: 'Enable' }));
    expect(await screen.findByText('ops@example.com enabled.')).toBeInTheDocument();
    expect(f.calls.filter((c) => c.method === 'PATCH').map((c) => c.body)).toEqual([{ disabled: true }, { disabled: false }]);
  });

  it('resets a password (12 characters at least) and signs out everywhere', async () => {
    const user = userEvent.setup();
    const { f } = operatorsApi();
    renderApp('/operators', f);
    await user.click(await screen.findByRole('button', { name: 'Reset password of ops@example.com' }));
    const dialog = screen.getByRole('dialog', { name: 'Reset password of ops@example.com' });
    const set = within(dialog).getByRole('button', { name: 'Set password' });
    await user.type(within(dialog).getByLabelText('New password'), 'too short');
    expect(set).toBeDisabled();
    await user.type(within(dialog).getByLabelText('New password'), ' but now fine');
    await user.click(set);
    expect(await screen.findByText('Password of ops@example.com reset; their sessions ended.')).toBeInTheDocument();
    expect(f.calls.find((c) => c.url.pathname.endsWith('/password'))!.body).toEqual({ password: 'too short but now fine' });

    await user.click(screen.getByRole('button', { name: 'Sign out everywhere ops@example.com' }));
    await user.click(within(screen.getByRole('dialog', { name: 'Sign out everywhere?' })).getByRole('button', { name: 'Sign out everywhere' }));
    expect(await screen.findByText('ops@example.com: 3 sessions ended.')).toBeInTheDocument();
  });

  it('counts password length in characters, like the control plane', () => {
    expect(passwordError('ééééééééééé')).not.toBeNull();
    expect(passwordError('éééééééééééé')).toBeNull();
  });
});

function token(over: Partial<ApiToken> = {}): ApiToken {
  return { id: 'tok-1', operatorId: 'op-o', name: 'ci', role: 'viewer', tenants: ['acme'], createdBy: 'ops@example.com', createdAt: NOW, expiresAt: '2999-01-01T00:00:00Z', ...over };
}

describe('API tokens screen', () => {
  it('creates a token within the caller’s grant and shows it once with a copy button', async () => {
    const user = userEvent.setup();
    const items: ApiToken[] = [];
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, OPERATOR),
      'GET /api/tenants': () => json(200, { items: TENANTS.filter((t) => t.id === 'acme') }),
      'GET /api/tokens': () => json(200, { items }),
      'POST /api/tokens': ({ body }) => {
        const t = token({ ...(body as object), id: 'tok-2' });
        items.push(t);
        return json(201, { ...t, token: 'rxc_0123456789abcdef' });
      },
      'DELETE /api/tokens/tok-2': () => {
        items[0].revokedAt = new Date().toISOString();
        return json(200, items[0]);
      },
    });
    renderApp('/tokens', f);
    expect(await screen.findByText('No API tokens yet.')).toBeInTheDocument();
    // An operator may hand on operator or viewer, never admin; no operator picker.
    expect(within(screen.getByLabelText('Role')).getAllByRole('option').map((o) => o.textContent)).toEqual(['operator', 'viewer']);
    expect(screen.queryByLabelText('Operator')).toBeNull();
    await user.click(screen.getByRole('button', { name: 'Create token' }));
    expect(screen.getByText('A name is required.')).toBeInTheDocument();
    await user.type(screen.getByLabelText('Name'), 'nightly export');
    await user.selectOptions(screen.getByLabelText('Lifetime'), '7 days');
    await user.click(screen.getByLabelText('Acme (acme)'));
    await user.click(screen.getByRole('button', { name: 'Create token' }));
    expect(await screen.findByTestId('api-token')).toHaveTextContent('rxc_0123456789abcdef');
    expect(screen.getByText(/shown only once/)).toBeInTheDocument();
    expect(f.calls.find((c) => c.method === 'POST')!.body).toEqual({ name: 'nightly export', role: 'viewer', tenants: ['acme'], ttlSeconds: 7 * 86400 });
    await user.click(screen.getByRole('button', { name: 'Copy' }));
    expect(await navigator.clipboard.readText()).toBe('rxc_0123456789abcdef');
    await user.click(screen.getByRole('button', { name: 'Done' }));
    expect(screen.queryByTestId('api-token')).toBeNull();
    expect(screen.queryByText('rxc_0123456789abcdef')).toBeNull();

    const row = (await screen.findByText('nightly export')).closest('tr')!;
    expect(within(row).getByText('active')).toBeInTheDocument();
    await user.click(within(row).getByRole('button', { name: 'Revoke token nightly export' }));
    await user.click(within(screen.getByRole('dialog', { name: 'Revoke API token?' })).getByRole('button', { name: 'Revoke token' }));
    expect(await screen.findByText(/Token "nightly export" revoked/)).toBeInTheDocument();
    await waitFor(() => expect(within(screen.getByText('nightly export').closest('tr')!).getByText('revoked')).toBeInTheDocument());
  });

  it('lets an admin pick an operator, create for them within their grant, and list every operator’s tokens', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, ADMIN),
      'GET /api/tenants': () => json(200, { items: TENANTS }),
      'GET /api/operators': () =>
        json(200, {
          items: [
            { id: 'op-a', email: 'admin@example.com', role: 'admin', tenants: [], disabled: false, createdAt: NOW },
            { id: 'op-o', email: 'ops@example.com', role: 'operator', tenants: ['acme'], disabled: false, createdAt: NOW },
          ],
        }),
      'GET /api/tokens': ({ url }) =>
        json(200, { items: url.searchParams.get('operatorId') === '' ? [token(), token({ id: 'tok-9', operatorId: 'op-a', name: 'admin-bot', role: 'admin', tenants: [] })] : [] }),
      'POST /api/tokens': ({ body }) => json(201, { ...token(body as Partial<ApiToken>), token: 'rxc_x' }),
    });
    renderApp('/tokens', f);
    const picker = await screen.findByLabelText('Operator');
    await waitFor(() => expect(within(picker).getAllByRole('option').map((o) => o.textContent)).toEqual(['Me (admin@example.com)', 'ops@example.com', 'All operators']));
    expect(within(screen.getByLabelText('Role')).getAllByRole('option')).toHaveLength(3);

    await user.selectOptions(picker, 'ops@example.com');
    expect(await screen.findByRole('heading', { name: 'New token for ops@example.com' })).toBeInTheDocument();
    // Within the owner's grant: no admin role, only their tenant.
    expect(within(screen.getByLabelText('Role')).getAllByRole('option').map((o) => o.textContent)).toEqual(['operator', 'viewer']);
    expect(screen.queryByLabelText('Beta (beta)')).toBeNull();
    await user.type(screen.getByLabelText('Name'), 'ops-bot');
    await user.click(screen.getByLabelText('Acme (acme)'));
    await user.click(screen.getByRole('button', { name: 'Create token' }));
    await screen.findByTestId('api-token');
    expect(f.calls.find((c) => c.method === 'POST')!.body).toEqual({ name: 'ops-bot', role: 'viewer', tenants: ['acme'], ttlSeconds: 90 * 86400, operatorId: 'op-o' });
    expect(f.calls.filter((c) => c.url.pathname === '/api/tokens' && c.method === 'GET').map((c) => c.url.search)).toContain('?operatorId=op-o');

    await user.selectOptions(picker, 'All operators');
    const table = await screen.findByRole('table', { name: 'API tokens' });
    expect(within(table).getByText('admin-bot').closest('tr')).toHaveTextContent('admin@example.com');
    expect(within(table).getByText('ci').closest('tr')).toHaveTextContent('ops@example.com');
    expect(screen.queryByRole('button', { name: 'Create token' })).toBeNull();
  });

  it('knows expired and revoked tokens, and the roles a token may carry', () => {
    expect(tokenState(token())).toBe('active');
    expect(tokenState(token({ expiresAt: '2000-01-01T00:00:00Z' }))).toBe('expired');
    expect(tokenState(token({ revokedAt: NOW }))).toBe('revoked');
    expect(tokenRoles(ADMIN, { role: 'admin' })).toEqual(['admin', 'operator', 'viewer']);
    expect(tokenRoles(ADMIN, { role: 'viewer' })).toEqual(['viewer']);
    expect(tokenRoles(OPERATOR, OPERATOR)).toEqual(['operator', 'viewer']);
  });
});

function entry(id: number, over: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id,
    at: NOW,
    actorId: 'op-a',
    actor: 'admin@example.com',
    actorRole: 'admin',
    tokenId: '',
    source: '192.0.2.1',
    action: 'operator.create',
    tenantId: '',
    target: `op-${id}`,
    outcome: 'success',
    status: 201,
    detail: '',
    ...over,
  };
}

describe('audit screen', () => {
  it('shows entries with their outcome, filters through the URL and pages with the cursor', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, ADMIN),
      'GET /api/tenants': () => json(200, { items: TENANTS }),
      'GET /api/audit': ({ url }) => {
        const q = url.searchParams;
        if (q.get('action') === 'auth.login') return json(200, { items: [entry(7, { action: 'auth.login', actor: 'x@example.com', actorId: '', actorRole: '', outcome: 'denied', status: 401, detail: 'invalid_credentials', target: '' })], nextCursor: '' });
        if (q.get('cursor') === 'c2') return json(200, { items: [entry(3, { action: 'token.create', tokenId: 'tok-5' })], nextCursor: '' });
        return json(200, { items: [entry(5, { action: 'sensor.command', tenantId: 'acme', target: 's-1', status: 503, outcome: 'failure', detail: 'nats_unavailable' })], nextCursor: 'c2' });
      },
    });
    renderApp('/audit', f);
    const table = await screen.findByRole('table', { name: 'Audit entries' });
    const first = within(table).getByText('sensor.command').closest('tr')!;
    expect(first).toHaveTextContent('admin@example.com');
    expect(first).toHaveTextContent('acme');
    expect(within(first).getByText('failure')).toBeInTheDocument();
    expect(first).toHaveTextContent('503 · nats_unavailable');
    expect(f.calls.find((c) => c.url.pathname === '/api/audit')!.url.search).toBe('?limit=50');

    await user.click(screen.getByRole('button', { name: 'Load more' }));
    expect(await within(table).findByText('token.create')).toBeInTheDocument();
    expect(within(table).getByText('sensor.command')).toBeInTheDocument();
    expect(within(table).getByText(/token tok-5/)).toBeInTheDocument();
    expect(screen.queryByRole('button', { name: 'Load more' })).toBeNull();
    expect(screen.getByText('2 entries; that is all.')).toBeInTheDocument();
    expect(f.calls.filter((c) => c.url.pathname === '/api/audit')[1].url.search).toBe('?cursor=c2&limit=50');

    await user.selectOptions(screen.getByLabelText('Action'), 'auth.login');
    const denied = (await screen.findByText('x@example.com')).closest('tr')!;
    expect(within(denied).getByText('denied')).toBeInTheDocument();
    expect(denied).toHaveTextContent('401 · invalid_credentials');
    expect(within(screen.getByRole('table', { name: 'Audit entries' })).queryByText('sensor.command')).toBeNull();
  });

  it('filters by actor and tenant', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, ADMIN),
      'GET /api/tenants': () => json(200, { items: TENANTS }),
      'GET /api/audit': () => json(200, { items: [], nextCursor: '' }),
    });
    renderApp('/audit', f);
    expect(await screen.findByText('No entries yet.')).toBeInTheDocument();
    await user.type(screen.getByLabelText('Actor (email)'), 'ops@example.com{Enter}');
    await waitFor(() => expect(f.calls.filter((c) => c.url.pathname === '/api/audit').at(-1)!.url.search).toBe('?actor=ops%40example.com&limit=50'));
    await user.selectOptions(screen.getByLabelText('Tenant'), 'beta');
    await waitFor(() => expect(f.calls.filter((c) => c.url.pathname === '/api/audit').at(-1)!.url.search).toBe('?tenantId=beta&actor=ops%40example.com&limit=50'));
    expect(await screen.findByText('No entries match these filters.')).toBeInTheDocument();
  });

  it('shows a refusal of a tenant filter as the problem, with a retry', async () => {
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, OPERATOR),
      'GET /api/tenants': () => json(200, { items: [TENANTS[0]] }),
      'GET /api/audit': () => problem(404, 'not_found', 'Not found', 'tenant beta not found'),
    });
    renderApp('/audit?tenantId=beta', f);
    expect(await screen.findByRole('alert')).toHaveTextContent('Not found tenant beta not found');
    expect(screen.getByLabelText('Tenant')).toHaveValue('beta');
    fireEvent.click(screen.getByRole('button', { name: 'Retry' }));
    await waitFor(() => expect(f.calls.filter((c) => c.url.pathname === '/api/audit')).toHaveLength(2));
  });
});

describe('account screen', () => {
  const VIEWER: Me = { id: 'op-v', email: 'view@example.com', role: 'viewer', tenants: ['acme'] };
  function accountApi() {
    return fakeFetch({
      'GET /api/auth/me': () => json(200, VIEWER),
      'POST /api/operators/op-v/password': () => new Response(null, { status: 204 }),
      'POST /api/operators/op-v/sign-out': () => json(200, { sessions: 2 }),
    });
  }

  it('shows who is signed in, reached from the e-mail in the top bar', async () => {
    const user = userEvent.setup();
    const f = accountApi();
    renderApp('/account', f);
    expect(await screen.findByRole('heading', { name: 'Your account' })).toBeInTheDocument();
    expect(screen.getByRole('link', { name: /view@example\.com/ })).toHaveAttribute('href', '/account');
    expect(screen.getByText(/read-only on the tenants granted/)).toBeInTheDocument();
    expect(screen.getByText('acme')).toBeInTheDocument();
    await user.type(screen.getByLabelText('New password'), 'a long new password');
    await user.type(screen.getByLabelText('New password again'), 'a long new passwort');
    await user.click(screen.getByRole('button', { name: 'Change password' }));
    expect(screen.getByRole('alert')).toHaveTextContent('Enter your current password.');
    await user.type(screen.getByLabelText('Current password'), 'the old password');
    await user.click(screen.getByRole('button', { name: 'Change password' }));
    expect(screen.getByRole('alert')).toHaveTextContent('The two entries differ.');
    expect(f.calls.filter((c) => c.method === 'POST')).toHaveLength(0);
  });

  it('changes the own password, which ends the session, and says so on the login page', async () => {
    const user = userEvent.setup();
    const f = accountApi();
    renderApp('/account', f);
    await user.type(await screen.findByLabelText('Current password'), 'the old password');
    await user.type(screen.getByLabelText('New password'), 'a long new password');
    await user.type(screen.getByLabelText('New password again'), 'a long new password');
    await user.click(screen.getByRole('button', { name: 'Change password' }));
    expect(await screen.findByText(/Password changed; every session of yours has ended/)).toBeInTheDocument();
    expect(screen.getByRole('heading', { name: 'Sign in to the RXC console' })).toBeInTheDocument();
    expect(f.calls.find((c) => c.method === 'POST')!.body).toEqual({ currentPassword: 'the old password', password: 'a long new password' });
  });

  it('shows a wrong current password and keeps the session', async () => {
    const user = userEvent.setup();
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, VIEWER),
      'POST /api/operators/op-v/password': () =>
        json(403, { type: 'urn:rxc:problem:wrong_password', title: 'Wrong current password', status: 403, code: 'wrong_password', detail: 'the current password is missing or wrong' }),
    });
    renderApp('/account', f);
    await user.type(await screen.findByLabelText('Current password'), 'not the password');
    await user.type(screen.getByLabelText('New password'), 'a long new password');
    await user.type(screen.getByLabelText('New password again'), 'a long new password');
    await user.click(screen.getByRole('button', { name: 'Change password' }));
    expect(await screen.findByText(/the current password is missing or wrong/)).toBeInTheDocument();
    expect(screen.getByRole('heading', { name: 'Your account' })).toBeInTheDocument();
  });

  it('signs out everywhere after confirmation', async () => {
    const user = userEvent.setup();
    renderApp('/account', accountApi());
    await user.click(await screen.findByRole('button', { name: 'Sign out everywhere' }));
    await user.click(within(screen.getByRole('dialog', { name: 'Sign out everywhere?' })).getByRole('button', { name: 'Sign out everywhere' }));
    expect(await screen.findByText('Signed out everywhere: 2 sessions ended.')).toBeInTheDocument();
  });
});
