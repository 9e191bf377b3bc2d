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

export function ErrorBanner({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  if (!error) return null;
  const e = error as Partial<ApiError> & { message?: string };
  const title = e.title ?? 'Something went wrong';
  const detail = e.detail ?? (e.title ? '' : e.message ?? String(error));
  return (
    <div className="banner banner-error" role="alert">
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
};

export function StateBadge({ state }: { state: string }) {
  return <span className={`badge badge-${STATE_CLASS[state] ?? 'neutral'}`}>{state}</span>;
}
