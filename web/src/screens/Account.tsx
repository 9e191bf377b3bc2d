// The signed-in operator's own account: who they are (role and tenants, as the control plane says),
// a new password, and signing out everywhere. Both end every session of theirs, this one included
// (the control plane deletes them), so the console returns to the login page and says why.

import { useState } from 'react';
import type { FormEvent } from 'react';
import { Link } from 'react-router';
import { useAccess, useSession } from '../auth/session';
import { ConfirmDialog } from '../components/Dialog';
import { ErrorBanner } from '../components/Status';
import { TenantList } from '../components/TenantChecks';
import { MIN_PASSWORD, passwordError, ROLE_HELP } from './Operators';
import { TwoFactorCard } from './TwoFactor';

export function AccountScreen() {
  const { api, endSession } = useSession();
  const { me } = useAccess();
  const [current, setCurrent] = useState('');
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const [touched, setTouched] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [confirmSignOut, setConfirmSignOut] = useState(false);
  const pwError =
    current === '' ? 'Enter your current password.' : (passwordError(password) ?? (password !== again ? 'The two entries differ.' : null));

  async function change(e: FormEvent) {
    e.preventDefault();
    setTouched(true);
    if (pwError) return;
    setBusy(true);
    setError(null);
    try {
      await api.resetPassword(me.id, password, current);
      endSession('Password changed; every session of yours has ended. Sign in with the new password.');
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }

  return (
    <section>
      <div className="page-head">
        <h1>Your account</h1>
      </div>
      <div className="card">
        <dl className="props">
          <dt>Email</dt>
          <dd>{me.email}</dd>
          <dt>Role</dt>
          <dd>
            {me.role} <span className="muted small">({ROLE_HELP[me.role]})</span>
          </dd>
          <dt>Tenants</dt>
          <dd>
            <TenantList role={me.role} tenants={me.tenants} />
          </dd>
        </dl>
        <p className="muted small">
          An admin changes roles and tenants. Tokens for scripts are on the <Link to="/tokens">API tokens</Link> screen.
        </p>
      </div>
      <TwoFactorCard />
      <form className="card form-inline" onSubmit={change} noValidate aria-labelledby="password-title">
        <h2 id="password-title">Change your password</h2>
        <div className="field">
          <label htmlFor="current-password">Current password</label>
          <input id="current-password" type="password" autoComplete="current-password" value={current} onChange={(e) => setCurrent(e.target.value)} aria-invalid={touched && current === ''} />
        </div>
        <div className="field">
          <label htmlFor="new-password">New password</label>
          <input id="new-password" type="password" autoComplete="new-password" value={password} onChange={(e) => setPassword(e.target.value)} aria-invalid={touched && !!passwordError(password)} />
        </div>
        <div className="field">
          <label htmlFor="new-password-again">New password again</label>
          <input id="new-password-again" type="password" autoComplete="new-password" value={again} onChange={(e) => setAgain(e.target.value)} aria-invalid={touched && password !== again} />
        </div>
        <button type="submit" className="btn btn-primary" disabled={busy}>
          {busy ? 'Changing…' : 'Change password'}
        </button>
        <span className={touched && pwError ? 'form-error' : 'help'} role={touched && pwError ? 'alert' : undefined}>
          {touched && pwError ? pwError : `At least ${MIN_PASSWORD} characters. Every session of yours ends, this one included; API tokens keep working.`}
        </span>
        <ErrorBanner error={error} />
      </form>
      <div className="card">
        <h2>Sessions</h2>
        <p>Signed in on a computer you no longer use? End every session of yours, this one included.</p>
        <button type="button" className="btn btn-danger-outline" onClick={() => setConfirmSignOut(true)}>
          Sign out everywhere
        </button>
      </div>
      {confirmSignOut && (
        <ConfirmDialog
          title="Sign out everywhere?"
          confirmLabel="Sign out everywhere"
          danger
          onClose={() => setConfirmSignOut(false)}
          onConfirm={async () => {
            const { sessions } = await api.signOutEverywhere(me.id);
            endSession(`Signed out everywhere: ${sessions} ${sessions === 1 ? 'session' : 'sessions'} ended.`);
          }}
        >
          <p>Every browser signed in as {me.email} must sign in again. API tokens are not affected.</p>
        </ConfirmDialog>
      )}
    </section>
  );
}
