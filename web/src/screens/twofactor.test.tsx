// Two-factor authentication in the console: the sign-in form asks for a code when the login answers
// totp_required (or a recovery code instead), and the account page enrols an authenticator.

import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import { fakeFetch, json, problem, renderApp } from '../test-utils';

describe('sign-in with a second factor', () => {
  it('asks for the code after the password, refuses a wrong one, signs in with the right one', async () => {
    const user = userEvent.setup();
    let signedIn = false;
    const f = fakeFetch({
      'GET /api/auth/me': () => (signedIn ? json(200, { email: 'op@example.com', role: 'admin', tenants: [] }) : problem(401, 'unauthenticated', 'Not signed in')),
      'POST /api/auth/login': ({ body }) => {
        const b = body as { email: string; password: string; totp?: string; recoveryCode?: string };
        if (b.password !== 'right') return problem(401, 'invalid_credentials', 'Wrong email or password');
        if (!b.totp && !b.recoveryCode) return problem(401, 'totp_required', 'TOTP code required');
        if (b.totp !== '123456' && b.recoveryCode !== 'abcd-efgh-jkmn-pqrs') return problem(401, 'invalid_second_factor', 'Invalid second factor');
        signedIn = true;
        return new Response(null, { status: 204 });
      },
      'GET /api/tenants': () => json(200, { items: [] }),
    });
    renderApp('/tenants', f);
    await user.type(await screen.findByLabelText('Email'), 'op@example.com');
    await user.type(screen.getByLabelText('Password'), 'right');
    await user.click(screen.getByRole('button', { name: 'Sign in' }));
    const code = await screen.findByLabelText('Code from your authenticator app');
    await waitFor(() => expect(code).toHaveFocus());
    await user.type(code, '000000');
    await user.click(screen.getByRole('button', { name: 'Verify and sign in' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('That code is wrong or was already used.');
    await user.type(screen.getByLabelText('Code from your authenticator app'), '123 456');
    await user.click(screen.getByRole('button', { name: 'Verify and sign in' }));
    expect(await screen.findByRole('heading', { name: 'Tenants' })).toBeInTheDocument();
    const logins = f.calls.filter((c) => c.method === 'POST' && c.url.pathname === '/api/auth/login').map((c) => c.body);
    expect(logins).toEqual([
      { email: 'op@example.com', password: 'right' },
      { email: 'op@example.com', password: 'right', totp: '000000' },
      { email: 'op@example.com', password: 'right', totp: '123456' },
    ]);
  });

  it('signs in with a recovery code instead', async () => {
    const user = userEvent.setup();
    let signedIn = false;
    const f = fakeFetch({
      'GET /api/auth/me': () => (signedIn ? json(200, { email: 'op@example.com', role: 'viewer', tenants: [] }) : problem(401, 'unauthenticated', 'Not signed in')),
      'POST /api/auth/login': ({ body }) => {
        const b = body as { recoveryCode?: string; totp?: string };
        if (!b.totp && !b.recoveryCode) return problem(401, 'totp_required', 'TOTP code required');
        if (b.recoveryCode !== 'abcd-efgh-jkmn-pqrs') return problem(401, 'invalid_second_factor', 'Invalid second factor');
        signedIn = true;
        return new Response(null, { status: 204 });
      },
      'GET /api/tenants': () => json(200, { items: [] }),
    });
    renderApp('/tenants', f);
    await user.type(await screen.findByLabelText('Email'), 'op@example.com');
    await user.type(screen.getByLabelText('Password'), 'right');
    await user.click(screen.getByRole('button', { name: 'Sign in' }));
    await user.click(await screen.findByRole('button', { name: 'Use a recovery code instead' }));
    await user.type(screen.getByLabelText('Recovery code'), 'abcd-efgh-jkmn-pqrs');
    await user.click(screen.getByRole('button', { name: 'Verify and sign in' }));
    expect(await screen.findByRole('heading', { name: 'Tenants' })).toBeInTheDocument();
  });
});

describe('two-factor enrolment', () => {
  it('shows the secret and URL, refuses a wrong code without signing out, then shows the recovery codes once', async () => {
    const user = userEvent.setup();
    let enabled = false;
    const codes = Array.from({ length: 10 }, (_, i) => `code-${i}`);
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, { id: 'op-1', email: 'op@example.com', role: 'operator', tenants: ['acme'], secondFactor: enabled }),
      'POST /api/auth/me/totp': () => json(201, { secret: 'JBSWY3DPEHPK3PXP', otpauthUrl: 'otpauth://totp/RXC:op@example.com?secret=JBSWY3DPEHPK3PXP&issuer=RXC' }),
      'POST /api/auth/me/totp/confirm': ({ body }) => {
        if ((body as { code: string }).code !== '654321') return problem(401, 'invalid_second_factor', 'Invalid second factor');
        enabled = true;
        return json(200, { recoveryCodes: codes });
      },
    });
    renderApp('/account', f);
    expect(await screen.findByTestId('totp-state')).toHaveTextContent('Off');
    await user.click(screen.getByRole('button', { name: 'Set up two-factor authentication' }));
    expect(await screen.findByTestId('totp-secret')).toHaveTextContent('JBSWY3DPEHPK3PXP');
    expect(screen.getByTestId('totp-url')).toHaveAttribute('href', expect.stringMatching(/^otpauth:\/\/totp\//));
    await user.type(screen.getByLabelText('Code from the app'), '111111');
    await user.click(screen.getByRole('button', { name: 'Turn on' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('That code is wrong.');
    // Still signed in: a wrong code is not an ended session.
    expect(screen.getByRole('heading', { name: 'Your account' })).toBeInTheDocument();
    await user.clear(screen.getByLabelText('Code from the app'));
    await user.type(screen.getByLabelText('Code from the app'), '654321');
    await user.click(screen.getByRole('button', { name: 'Turn on' }));
    const list = await screen.findByRole('list', { name: 'Recovery codes' });
    expect(list.querySelectorAll('li')).toHaveLength(10);
    expect(screen.queryByTestId('totp-secret')).toBeNull();
    await user.click(screen.getByRole('button', { name: 'I have saved them' }));
    await waitFor(() => expect(screen.getByTestId('totp-state')).toHaveTextContent('On'));
    expect(screen.queryByRole('list', { name: 'Recovery codes' })).toBeNull();
  });

  it('sends an admin who must enrol to the account page from anywhere', async () => {
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, { id: 'op-1', email: 'root@example.com', role: 'admin', tenants: [], secondFactorRequired: true }),
    });
    renderApp('/tenants', f);
    expect(await screen.findByRole('heading', { name: 'Your account' })).toBeInTheDocument();
    expect(screen.getByText(/requires admins to use two-factor authentication/)).toBeInTheDocument();
    expect(f.calls.some((c) => c.url.pathname === '/api/tenants')).toBe(false);
  });
});

describe('single sign-on button', () => {
  it('shows "Sign in with <name>" linking to the control plane when it offers OIDC', async () => {
    const f = fakeFetch({
      'GET /api/auth/me': () => problem(401, 'unauthenticated', 'Not signed in'),
      'GET /api/auth/providers': () => json(200, { oidc: { displayName: 'Acme SSO', loginUrl: '/api/auth/oidc/login' } }),
    });
    renderApp('/login', f);
    const link = await screen.findByRole('link', { name: 'Sign in with Acme SSO' });
    expect(link.getAttribute('href')).toMatch(/\/api\/auth\/oidc\/login$/);
  });

  it('shows no button without OIDC, or when the control plane does not know the route', async () => {
    for (const answer of [() => json(200, { oidc: null }), () => problem(404, 'route_not_found', 'Not found')]) {
      const f = fakeFetch({
        'GET /api/auth/me': () => problem(401, 'unauthenticated', 'Not signed in'),
        'GET /api/auth/providers': answer,
      });
      const { unmount } = renderApp('/login', f);
      await screen.findByLabelText('Email');
      await waitFor(() => expect(f.calls.some((c) => c.url.pathname === '/api/auth/providers')).toBe(true));
      expect(screen.queryByTestId('sso-button')).toBeNull();
      unmount();
    }
  });
});

describe('admin: sign-in settings and second-factor reset', () => {
  it('saves "require two-factor for admins" and SSO-only with a break-glass admin, showing a refusal', async () => {
    const user = userEvent.setup();
    let stored = { requireAdminSecondFactor: false, ssoOnly: false, breakGlassEmail: '' };
    const f = fakeFetch({
      'GET /api/auth/me': () => json(200, { id: 'op-a', email: 'root@example.com', role: 'admin', tenants: [], secondFactor: true }),
      'GET /api/operators': () =>
        json(200, {
          items: [{ id: 'op-b', email: 'bob@example.com', role: 'operator', tenants: [], disabled: false, createdAt: new Date().toISOString(), secondFactor: true }],
        }),
      'GET /api/tenants': () => json(200, { items: [] }),
      'GET /api/auth/settings': () => json(200, stored),
      'PATCH /api/auth/settings': ({ body }) => {
        const b = body as typeof stored;
        if (b.ssoOnly && !b.breakGlassEmail) return problem(400, 'invalid_input', 'Invalid input', 'SSO-only needs a break-glass account (breakGlassEmail)');
        stored = b;
        return json(200, stored);
      },
      'DELETE /api/operators/op-b/totp': () => new Response(null, { status: 204 }),
    });
    renderApp('/operators', f);
    await user.click(await screen.findByLabelText('Require two-factor authentication for admins'));
    await user.click(screen.getByLabelText('Single sign-on only'));
    await user.click(screen.getByRole('button', { name: 'Save sign-in settings' }));
    expect(await screen.findByText(/needs a break-glass account/)).toBeInTheDocument();
    expect(stored.ssoOnly).toBe(false);
    await user.type(screen.getByLabelText(/Break-glass admin/), 'root@example.com');
    await user.click(screen.getByRole('button', { name: 'Save sign-in settings' }));
    expect(await screen.findByText('Sign-in settings saved.')).toBeInTheDocument();
    expect(stored).toEqual({ requireAdminSecondFactor: true, ssoOnly: true, breakGlassEmail: 'root@example.com' });

    await user.click(screen.getByRole('button', { name: 'Reset two-factor of bob@example.com' }));
    await user.click(await screen.findByRole('button', { name: 'Reset two-factor' }));
    await waitFor(() => expect(f.calls.some((c) => c.method === 'DELETE' && c.url.pathname === '/api/operators/op-b/totp')).toBe(true));
  });
});
