import type { ReactNode } from 'react';
import type { ApiError } from '../api/client';

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="loading" role="status">
      <span className="spinner" aria-hidden="true" />
      {label}
    </p>
  );
}

/** Problems the console words itself, because the operator acts on them differently. */
const WORDING: Record<string, { title: string; detail: string }> = {
  last_admin: {
    title: 'Last admin',
    detail: 'This is the last enabled admin: it cannot be demoted or disabled. Make another operator admin first.',
  },
};

/** Title and detail of any error: an ApiError, a plain {title, detail}, or an Error. */
export function explain(error: unknown): { title: string; detail: string; code?: string; kind?: string } {
  const e = error as Partial<ApiError> & { message?: string };
  const w = e.code ? WORDING[e.code] : undefined;
  if (w) return { ...w, code: e.code, kind: e.kind };
  const title = e.title ?? 'Something went wrong';
  const detail = e.detail ?? (e.title ? '' : e.message ?? String(error));
  return { title, detail, code: e.code, kind: e.kind };
}

export function ErrorBanner({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  if (!error) return null;
  const e = explain(error);
  const { title, detail } = e;
  return (
    <div className="banner banner-error" role="alert" data-code={e.code}>
      <strong>{title}</strong>
      {detail && <span> {detail}</span>}
      {e.code && e.kind === 'problem' && <span className="muted"> ({e.code})</span>}
      {onRetry && (
        <button type="button" className="btn btn-small" onClick={onRetry}>
          Retry
        </button>
      )}
    </div>
  );
}

export function Notice({ children }: { children: ReactNode }) {
  return (
    <div className="banner banner-ok" role="status">
      {children}
    </div>
  );
}

const STATE_CLASS: Record<string, string> = {
  running: 'ok',
  online: 'ok',
  provisioned: 'ok',
  active: 'ok',
  stopped: 'neutral',
  pending: 'warn',
  offline: 'warn',
  used: 'neutral',
  expired: 'neutral',
  error: 'bad',
  revoked: 'bad',
  success: 'ok',
  enabled: 'ok',
  denied: 'warn',
  failure: 'bad',
  accepted: 'ok',
  failed: 'bad',
  disabled: 'neutral',
};

export function StateBadge({ state }: { state: string }) {
  return <span className={`badge badge-${STATE_CLASS[state] ?? 'neutral'}`}>{state}</span>;
}
