import { useEffect, useRef, useState } from 'react';
import type { FormEvent } from 'react';
import { Navigate, useLocation, useNavigate } from 'react-router';
import { ApiError } from '../api/client';
import { reasonFor, useSession } from '../auth/session';
import { Loading } from '../components/Status';

/** A held-back login (429 login_throttled) or a busy control plane (503 login_busy): wait, then retry. */
interface Hold {
  code: 'login_throttled' | 'login_busy';
  until: number | null; // epoch ms; null when the API named no time
}

export function holdOf(err: unknown, now = Date.now()): Hold | null {
  if (!(err instanceof ApiError) || (err.code !== 'login_throttled' && err.code !== 'login_busy')) return null;
  return { code: err.code, until: err.retryAfter === undefined ? null : now + err.retryAfter * 1000 };
}

export function holdMessage(hold: Hold, now = Date.now()): string {
  const left = hold.until === null ? null : Math.max(0, Math.ceil((hold.until - now) / 1000));
  const wait = left === null ? 'Wait a while before you try again.' : left > 0 ? `Try again in ${waitText(left)}.` : 'You can try again now.';
  return hold.code === 'login_throttled'
    ? `Too many failed sign-ins for this account or from this address. ${wait}`
    : `The control plane is checking many sign-ins at once. ${wait}`;
}

function waitText(s: number): string {
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  const r = s % 60;
  return r ? `${m} min ${r} s` : `${m} min`;
}

export function LoginScreen() {
  const { session, signIn, config, api } = useSession();
  const [sso, setSso] = useState<{ displayName: string; href: string } | null>(null);
  // Single sign-on is offered when the control plane has it; an older one without the route has none.
  useEffect(() => {
    let live = true;
    api.providers().then(
      (p) => live && p?.oidc && setSso({ displayName: p.oidc.displayName, href: api.ssoLoginUrl(p.oidc.loginUrl) }),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [api]);
  const navigate = useNavigate();
  const location = useLocation();
  const from = (location.state as { from?: string } | null)?.from ?? '/sensors';
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [hold, setHold] = useState<Hold | null>(null);
  // The account has a second factor: the password was right, a code is asked for.
  const [needCode, setNeedCode] = useState(false);
  const [useRecovery, setUseRecovery] = useState(false);
  const [code, setCode] = useState('');
  const codeRef = useRef<HTMLInputElement>(null);
  const [now, setNow] = useState(() => Date.now());
  const emailRef = useRef<HTMLInputElement>(null);

  useEffect(() => emailRef.current?.focus(), []);
  useEffect(() => {
    if (needCode) codeRef.current?.focus();
  }, [needCode, useRecovery]);

  // Counts the wait down once a second while a hold lasts.
  useEffect(() => {
    if (!hold?.until) return;
    const t = setInterval(() => {
      const n = Date.now();
      setNow(n);
      if (n >= hold.until!) clearInterval(t);
    }, 1000);
    return () => clearInterval(t);
  }, [hold]);

  if (session.status === 'checking') return <Loading label="Checking your session…" />;
  if (session.status === 'signedIn') return <Navigate to={from} replace />;

  const reason =
    error || hold
      ? null
      : session.status === 'unavailable'
        ? { kind: 'error' as const, message: `The control plane is temporarily unavailable: ${session.message}` }
        : session.reason;
  const held = !!hold && hold.until !== null && now < hold.until;

  async function submit(e: FormEvent) {
    e.preventDefault();
    if (held) return;
    setBusy(true);
    setError(null);
    setHold(null);
    try {
      const factor = needCode ? (useRecovery ? { recoveryCode: code.trim() } : { totp: code.replace(/\s/g, '') }) : undefined;
      await signIn(email, password, factor);
      navigate(from, { replace: true });
    } catch (err) {
      const h = holdOf(err);
      if (h) {
        setNow(Date.now());
        setHold(h);
      } else if (err instanceof ApiError && err.code === 'totp_required') {
        setNeedCode(true);
      } else if (err instanceof ApiError && err.code === 'invalid_second_factor') {
        setCode('');
        setError(useRecovery ? 'That recovery code is wrong or was already used.' : 'That code is wrong or was already used. Wait for the next code of your app.');
      } else {
        const r = reasonFor(err, false);
        setError(r ? r.message : 'Email or password is wrong.');
      }
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
        {hold && (
          <div className="banner banner-error" role="alert" data-hold={hold.code}>
            {holdMessage(hold, now)}
          </div>
        )}
        <label htmlFor="login-email">Email</label>
        <input id="login-email" ref={emailRef} type="email" autoComplete="username" required readOnly={needCode} value={email} onChange={(e) => setEmail(e.target.value)} />
        <label htmlFor="login-password">Password</label>
        <input id="login-password" type="password" autoComplete="current-password" required readOnly={needCode} value={password} onChange={(e) => setPassword(e.target.value)} />
        {needCode && (
          <div className="second-factor" data-testid="second-factor">
            <p className="muted small">This account has two-factor authentication.</p>
            {useRecovery ? (
              <>
                <label htmlFor="login-recovery">Recovery code</label>
                <input id="login-recovery" ref={codeRef} autoComplete="off" required value={code} onChange={(e) => setCode(e.target.value)} />
              </>
            ) : (
              <>
                <label htmlFor="login-totp">Code from your authenticator app</label>
                <input id="login-totp" ref={codeRef} inputMode="numeric" autoComplete="one-time-code" pattern="[0-9 ]{6,7}" required value={code} onChange={(e) => setCode(e.target.value)} />
              </>
            )}
            <button
              type="button"
              className="btn btn-small"
              onClick={() => {
                setUseRecovery(!useRecovery);
                setCode('');
                setError(null);
              }}
            >
              {useRecovery ? 'Use a code from your app instead' : 'Use a recovery code instead'}
            </button>
          </div>
        )}
        <button type="submit" className="btn btn-primary btn-block" disabled={busy || held}>
          {busy ? 'Signing in…' : needCode ? 'Verify and sign in' : 'Sign in'}
        </button>
        {sso && !needCode && (
          <a className="btn btn-block" href={sso.href} data-testid="sso-button">
            Sign in with {sso.displayName}
          </a>
        )}
        <p className="muted small">Control plane: {config.apiBaseUrl}</p>
      </form>
    </main>
  );
}
