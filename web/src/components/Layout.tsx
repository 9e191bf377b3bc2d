import { useEffect, useState } from 'react';
import { Navigate, NavLink, Outlet, useLocation } from 'react-router';
import { SnapshotProvider } from '../analytics/snapshot';
import { useSession } from '../auth/session';
import { ChatLauncher } from '../chat/Chat';
import type { Me } from '../api/types';
import { Loading } from './Status';

export function RequireSession() {
  const { session } = useSession();
  const location = useLocation();
  if (session.status === 'checking') return <Loading label="Checking your session…" />;
  if (session.status === 'unavailable') return <Outage message={session.message} retryAt={session.retryAt} />;
  if (session.status === 'signedOut') return <Navigate to="/login" replace state={{ from: location.pathname + location.search }} />;
  // An admin who must enrol a second factor first may use nothing else.
  if (session.me.secondFactorRequired && location.pathname !== '/account') return <Navigate to="/account" replace />;
  return <Layout me={session.me} />;
}

export function Outage({ message, retryAt }: { message: string; retryAt: number }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  const seconds = Math.max(0, Math.ceil((retryAt - now) / 1000));
  return (
    <main className="content outage" id="main">
      <h1>RXC is temporarily unavailable</h1>
      <div className="banner banner-error" role="alert" data-reason="unavailable">
        The control plane cannot serve requests right now: {message}
      </div>
      <p className="muted" aria-live="polite">
        Your session is kept. {seconds > 0 ? `Checking again in ${seconds} s.` : 'Checking again…'}
      </p>
    </main>
  );
}

function Layout({ me }: { me: Me }) {
  const { signOut } = useSession();
  return (
    <SnapshotProvider>
      <div className="shell">
        <a className="skip-link" href="#main">
          Skip to content
        </a>
        <header className="topbar">
          <span className="brand">RXC</span>
          <nav aria-label="Main">
            <NavLink to="/sensors">Sensors</NavLink>
            <NavLink to="/batches">Batches</NavLink>
            <NavLink to="/tenants">Tenants</NavLink>
            <NavLink to="/analytics">Analytics</NavLink>
            <NavLink to="/audit">Audit</NavLink>
            <NavLink to="/tokens">API tokens</NavLink>
            {me.role === 'admin' && <NavLink to="/operators">Operators</NavLink>}
          </nav>
          <span className="spacer" />
          <NavLink to="/account" className="user" title="Your account: signed in as">
            {me.email} <span className="role" data-testid="my-role">{me.role}</span>
          </NavLink>
          <button type="button" className="btn btn-small" onClick={signOut}>
            Sign out
          </button>
        </header>
        <main id="main" className="content" tabIndex={-1}>
          <Outlet />
        </main>
        <ChatLauncher />
      </div>
    </SnapshotProvider>
  );
}
