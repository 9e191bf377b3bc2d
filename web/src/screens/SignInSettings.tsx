// The deployment's sign-in rules (admins): require two-factor authentication for admins, and
// SSO-only with a break-glass account (docs/authentication.md).

import { useEffect, useState } from 'react';
import type { FormEvent } from 'react';
import type { AuthSettings } from '../api/types';
import { useSession } from '../auth/session';
import { ErrorBanner, Notice } from '../components/Status';

export function SignInSettings() {
  const { api } = useSession();
  const [settings, setSettings] = useState<AuthSettings | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    let live = true;
    api.authSettings().then(
      (s) => live && setSettings({ requireAdminSecondFactor: !!s.requireAdminSecondFactor, ssoOnly: !!s.ssoOnly, breakGlassEmail: s.breakGlassEmail ?? '' }),
      (err) => live && setError(err),
    );
    return () => {
      live = false;
    };
  }, [api]);

  async function save(e: FormEvent) {
    e.preventDefault();
    if (!settings) return;
    setBusy(true);
    setError(null);
    setSaved(false);
    try {
      setSettings(await api.updateAuthSettings(settings));
      setSaved(true);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <form className="card" onSubmit={save} aria-labelledby="signin-settings-title">
      <h2 id="signin-settings-title">Sign-in settings</h2>
      {settings && (
        <>
          <label className="check">
            <input
              type="checkbox"
              checked={settings.requireAdminSecondFactor}
              onChange={(e) => setSettings({ ...settings, requireAdminSecondFactor: e.target.checked })}
            />{' '}
            Require two-factor authentication for admins
          </label>
          <p className="muted small">An admin without it can only set it up after signing in.</p>
          <label className="check">
            <input type="checkbox" checked={settings.ssoOnly} onChange={(e) => setSettings({ ...settings, ssoOnly: e.target.checked })} /> Single sign-on only
          </label>
          <div className="field">
            <label htmlFor="break-glass">Break-glass admin (signs in with a password when single sign-on is down)</label>
            <input id="break-glass" type="email" value={settings.breakGlassEmail} onChange={(e) => setSettings({ ...settings, breakGlassEmail: e.target.value })} />
          </div>
          <button type="submit" className="btn btn-primary" disabled={busy}>
            {busy ? 'Saving…' : 'Save sign-in settings'}
          </button>
        </>
      )}
      {saved && <Notice>Sign-in settings saved.</Notice>}
      <ErrorBanner error={error} />
    </form>
  );
}
