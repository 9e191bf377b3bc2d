// Session state for the whole app. The API client reports every 401 here; the session then ends
// and the login page says why, including when the API cannot be reached or the base URL is wrong.
// A signed-in session knows its principal (GET /api/auth/me): role and tenants decide which
// actions the screens offer (see access.ts).

import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState } from 'react';
import type { ReactNode } from 'react';
import { ApiClient, ApiError } from '../api/client';
import type { Me, SecondFactor } from '../api/types';
import type { AppConfig } from '../config';
import { can, principalOf } from './access';
import type { Permission } from './access';

export type SessionState =
  | { status: 'checking' }
  | { status: 'signedIn'; email: string; me: Me }
  | { status: 'signedOut'; reason: SignedOutReason | null }
  /**
   * The control plane answered 503 (its database or NATS is down) when asked who is signed in: the
   * session may be perfectly good, so the operator sees the outage and the check is retried,
   * instead of a sign-in form that could not work either.
   */
  | { status: 'unavailable'; message: string; retryAt: number };

/** Seconds between checks while the control plane answers 503: its Retry-After, within bounds. */
export function outageRetrySeconds(retryAfter: number | undefined): number {
  return Math.min(30, Math.max(2, retryAfter ?? 5));
}

export interface SignedOutReason {
  kind: 'expired' | 'unreachable' | 'misconfigured' | 'signedOut' | 'error';
  message: string;
}

interface SessionContextValue {
  config: AppConfig;
  api: ApiClient;
  session: SessionState;
  signIn: (email: string, password: string, factor?: SecondFactor) => Promise<void>;
  /** Reads the principal again (after enrolling a second factor). */
  refresh: () => Promise<void>;
  signOut: () => Promise<void>;
  /** Ends the session here after the API ended it (own password changed, signed out everywhere). */
  endSession: (message: string) => void;
}

const SessionContext = createContext<SessionContextValue | null>(null);

export function reasonFor(err: unknown, wasSignedIn: boolean): SignedOutReason | null {
  if (err instanceof ApiError) {
    switch (err.kind) {
      case 'unauthorized':
        return wasSignedIn ? { kind: 'expired', message: 'Your session has expired. Sign in again.' } : null;
      case 'unreachable':
        return { kind: 'unreachable', message: `The control plane cannot be reached. ${err.detail}` };
      case 'misconfigured':
        return { kind: 'misconfigured', message: `${err.title}: ${err.detail}` };
      default:
        return { kind: 'error', message: err.message };
    }
  }
  return { kind: 'error', message: err instanceof Error ? err.message : String(err) };
}

/** onStart runs once with the client, as the session check starts (to ask early for the first screen's data). */
export function SessionProvider({ config, children, fetchFn, onStart }: { config: AppConfig; children: ReactNode; fetchFn?: typeof fetch; onStart?: (api: ApiClient) => void }) {
  const [session, setSession] = useState<SessionState>({ status: 'checking' });
  const signedIn = useRef(false);

  const api = useMemo(
    () =>
      new ApiClient({
        baseUrl: config.apiBaseUrl,
        fetch: fetchFn,
        onUnauthorized: (err) => {
          // A wrong code while enrolling a second factor is a 401 of its own, not an ended session.
          if (!signedIn.current || err.code === 'invalid_second_factor' || err.code === 'totp_required') return;
          signedIn.current = false;
          setSession({ status: 'signedOut', reason: { kind: 'expired', message: 'Your session has expired. Sign in again.' } });
        },
      }),
    [config.apiBaseUrl, fetchFn],
  );

  const onStartRef = useRef(onStart);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    onStartRef.current?.(api);
    const check = () =>
      api.me().then(
        (me) => {
          if (!live) return;
          signedIn.current = true;
          const p = principalOf(me);
          setSession({ status: 'signedIn', email: p.email, me: p });
        },
        (err) => {
          if (!live) return;
          if (err instanceof ApiError && err.status === 503) {
            const wait = outageRetrySeconds(err.retryAfter);
            setSession({ status: 'unavailable', message: err.detail || err.title, retryAt: Date.now() + wait * 1000 });
            timer = setTimeout(check, wait * 1000);
            return;
          }
          setSession({ status: 'signedOut', reason: reasonFor(err, false) });
        },
      );
    void check();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [api]);

  const signIn = useCallback(
    async (email: string, password: string, factor?: SecondFactor) => {
      await api.login(email, password, factor);
      const me = principalOf(await api.me());
      signedIn.current = true;
      setSession({ status: 'signedIn', email: me.email, me });
    },
    [api],
  );

  const refresh = useCallback(async () => {
    const me = principalOf(await api.me());
    setSession({ status: 'signedIn', email: me.email, me });
  }, [api]);

  const signOut = useCallback(async () => {
    signedIn.current = false;
    try {
      await api.logout();
      setSession({ status: 'signedOut', reason: { kind: 'signedOut', message: 'You are signed out.' } });
    } catch (err) {
      setSession({ status: 'signedOut', reason: reasonFor(err, false) ?? { kind: 'signedOut', message: 'You are signed out.' } });
    }
  }, [api]);

  const endSession = useCallback((message: string) => {
    signedIn.current = false;
    setSession({ status: 'signedOut', reason: { kind: 'signedOut', message } });
  }, []);

  const value = useMemo(() => ({ config, api, session, signIn, refresh, signOut, endSession }), [config, api, session, signIn, refresh, signOut, endSession]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionContextValue {
  const v = useContext(SessionContext);
  if (!v) throw new Error('useSession outside SessionProvider');
  return v;
}

const NOBODY: Me = { id: '', email: '', role: 'viewer', tenants: [] };

/** The signed-in principal and its permission check; nobody (may nothing) while signed out. */
export function useAccess(): { me: Me; can: (perm: Permission, tenantId?: string) => boolean } {
  const { session } = useSession();
  const me = session.status === 'signedIn' ? session.me : NOBODY;
  return useMemo(() => ({ me, can: (perm: Permission, tenantId?: string) => session.status === 'signedIn' && can(me, perm, tenantId) }), [me, session.status]);
}
