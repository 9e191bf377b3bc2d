import { useEffect, useRef, useState } from 'react';
import type { FormEvent } from 'react';
import { Navigate, useLocation, useNavigate } from 'react-router';
import { reasonFor, useSession } from '../auth/session';
import { Loading } from '../components/Status';

export function LoginScreen() {
  const { session, signIn, config } = useSession();
  const navigate = useNavigate();
  const location = useLocation();
  const from = (location.state as { from?: string } | null)?.from ?? '/sensors';
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const emailRef = useRef<HTMLInputElement>(null);

  useEffect(() => emailRef.current?.focus(), []);

  if (session.status === 'checking') return <Loading label="Checking your session…" />;
  if (session.status === 'signedIn') return <Navigate to={from} replace />;

  const reason = error ? null : session.reason;

  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(email, password);
      navigate(from, { replace: true });
    } catch (err) {
      const r = reasonFor(err, false);
      setError(r ? r.message : 'Email or password is wrong.');
      setBusy(false);
    }
  }

  return (
    <main className="login">
      <form className="card login-card" onSubmit={submit} aria-labelledby="login-title">
        <div className="brand brand-large" aria-hidden="true">
          RXC
        </div>
        <h1 id="login-title">Sign in to the RXC console</h1>
        {reason && (
          <div className={`banner ${reason.kind === 'signedOut' ? 'banner-ok' : 'banner-error'}`} role="alert" data-reason={reason.kind}>
            {reason.message}
          </div>
        )}
        {error && (
          <div className="banner banner-error" role="alert">
            {error}
          </div>
        )}
        <label htmlFor="login-email">Email</label>
        <input id="login-email" ref={emailRef} type="email" autoComplete="username" required value={email} onChange={(e) => setEmail(e.target.value)} />
        <label htmlFor="login-password">Password</label>
        <input id="login-password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p className="muted small">Control plane: {config.apiBaseUrl}</p>
      </form>
    </main>
  );
}
