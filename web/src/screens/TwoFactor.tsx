// Two-factor authentication (TOTP) of the signed-in operator's own account: set it up (the secret and
// its otpauth:// URL are shown once), turn it on with a code from the app, and keep the ten recovery
// codes that are shown once. Where the deployment requires a second factor for admins, an admin
// without one sees only this until it is on.

import { useState } from 'react';
import type { FormEvent } from 'react';
import { ApiError } from '../api/client';
import type { TotpEnrolment } from '../api/types';
import { useAccess, useSession } from '../auth/session';
import { ErrorBanner } from '../components/Status';

export function TwoFactorCard() {
  const { api, refresh } = useSession();
  const { me } = useAccess();
  const [enrolment, setEnrolment] = useState<TotpEnrolment | null>(null);
  const [code, setCode] = useState('');
  const [currentCode, setCurrentCode] = useState('');
  const [recovery, setRecovery] = useState<string[] | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [codeError, setCodeError] = useState<string | null>(null);

  async function begin() {
    setBusy(true);
    setError(null);
    setRecovery(null);
    try {
      setEnrolment(await api.beginTotp());
      setCode('');
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  async function confirm(e: FormEvent) {
    e.preventDefault();
    setCodeError(null);
    setError(null);
    setBusy(true);
    try {
      const { recoveryCodes } = await api.confirmTotp(code.replace(/\s/g, ''), me.secondFactor ? currentCode.replace(/\s/g, '') : undefined);
      setRecovery(recoveryCodes);
      setEnrolment(null);
    } catch (err) {
      if (err instanceof ApiError && err.code === 'invalid_second_factor') setCodeError('That code is wrong. Check the clock of your device and enter the current code.');
      else setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="card" aria-labelledby="totp-title">
      <h2 id="totp-title">Two-factor authentication</h2>
      {me.secondFactorRequired && (
        <div className="banner banner-error" role="alert" data-reason="second-factor-required">
          This deployment requires admins to use two-factor authentication. Set it up to continue.
        </div>
      )}
      <p data-testid="totp-state">
        {me.secondFactor ? 'On: signing in needs a code from your authenticator app.' : 'Off: signing in needs only your password.'}
      </p>
      {recovery && (
        <div className="card issued" data-testid="recovery-codes">
          <h3>Two-factor authentication is on</h3>
          <p className="warn-text">Save these recovery codes now: they are shown only once. Each signs you in once if you lose your device.</p>
          <ul className="recovery-codes" aria-label="Recovery codes">
            {recovery.map((c) => (
              <li key={c}>
                <code className="claim-code">{c}</code>
              </li>
            ))}
          </ul>
          <button type="button" className="btn btn-primary" onClick={() => void refresh().then(() => setRecovery(null))}>
            I have saved them
          </button>
        </div>
      )}
      {!enrolment && !recovery && (
        <button type="button" className="btn" onClick={() => void begin()} disabled={busy}>
          {me.secondFactor ? 'Set up a new authenticator' : 'Set up two-factor authentication'}
        </button>
      )}
      {enrolment && (
        <form onSubmit={confirm} noValidate aria-label="Confirm two-factor authentication">
          <p>
            Add this account to your authenticator app (Google Authenticator, Authy, 1Password, …) with the key below, or open the link on the
            device with the app. It is shown only now.
          </p>
          <dl className="props">
            <dt>Key</dt>
            <dd>
              <code className="claim-code" data-testid="totp-secret">
                {enrolment.secret}
              </code>
            </dd>
            <dt>Link</dt>
            <dd>
              <a href={enrolment.otpauthUrl} data-testid="totp-url">
                {enrolment.otpauthUrl}
              </a>
            </dd>
          </dl>
          <div className="field">
            <label htmlFor="totp-code">Code from the app</label>
            <input id="totp-code" inputMode="numeric" autoComplete="one-time-code" value={code} onChange={(e) => setCode(e.target.value)} aria-invalid={!!codeError} />
          </div>
          {me.secondFactor && (
            <div className="field">
              <label htmlFor="totp-current-code">Code from your current authenticator</label>
              <input id="totp-current-code" inputMode="numeric" autoComplete="one-time-code" value={currentCode} onChange={(e) => setCurrentCode(e.target.value)} />
              <span className="help">Replacing two-factor authentication needs the device you use now; an admin can reset a lost one.</span>
            </div>
          )}
          <button type="submit" className="btn btn-primary" disabled={busy || code.replace(/\s/g, '').length !== 6 || (me.secondFactor && currentCode.replace(/\s/g, '').length !== 6)}>
            {busy ? 'Checking…' : 'Turn on'}
          </button>
          {codeError && (
            <span className="form-error" role="alert">
              {codeError}
            </span>
          )}
        </form>
      )}
      <ErrorBanner error={error} />
    </div>
  );
}
