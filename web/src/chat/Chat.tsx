// The analytics chat: a launcher and a side panel, both present only when the image's flag and
// the control plane's status agree (see gating.ts).

import { useEffect, useRef, useState } from 'react';
import type { FormEvent } from 'react';
import { useLocation } from 'react-router';
import { useCurrentView, withText } from '../analytics/snapshot';
import { readChatEvents } from '../api/sse';
import type { ChatEvent } from '../api/sse';
import type { ChatStatus, Tenant } from '../api/types';
import { useSession } from '../auth/session';
import { ErrorBanner } from '../components/Status';
import { chatAvailability, showsEnrichment } from './gating';

export function ChatLauncher() {
  const { api, config } = useSession();
  const [status, setStatus] = useState<ChatStatus | null>(null);
  const [open, setOpen] = useState(false);
  const launcherRef = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    let live = true;
    chatAvailability(config.analyticsAiChatEnabled, api).then((a) => live && setStatus(a.available ? a.status! : null));
    return () => {
      live = false;
    };
  }, [api, config.analyticsAiChatEnabled]);

  if (!status) return null;
  return (
    <>
      {!open && (
        <button ref={launcherRef} type="button" className="btn btn-primary chat-launcher" onClick={() => setOpen(true)}>
          Ask analytics
        </button>
      )}
      {open && (
        <ChatShell
          status={status}
          onClose={() => {
            setOpen(false);
            setTimeout(() => launcherRef.current?.focus(), 0);
          }}
        />
      )}
    </>
  );
}

interface Turn {
  question: string;
  answer: string;
  chips: Extract<ChatEvent, { type: 'enrichment' }>[];
  model?: string;
  error?: string;
  streaming: boolean;
}

export function ChatShell({ status, onClose }: { status: ChatStatus; onClose: () => void }) {
  const { api } = useSession();
  const location = useLocation();
  const [tenants, setTenants] = useState<Tenant[] | null>(null);
  const [tenantsError, setTenantsError] = useState<unknown>(null);
  const [tenantId, setTenantId] = useState('');
  const [question, setQuestion] = useState('');
  const [context, setContext] = useState('');
  const [turns, setTurns] = useState<Turn[]>([]);
  const abortRef = useRef<AbortController | null>(null);
  const view = useCurrentView();
  const questionRef = useRef<HTMLTextAreaElement>(null);
  const streaming = turns.some((t) => t.streaming);

  useEffect(() => {
    questionRef.current?.focus();
    api.listTenants().then(
      (r) => {
        setTenants(r.items);
        const fromUrl = view?.tenantId ?? new URLSearchParams(location.search).get('tenantId');
        setTenantId(fromUrl && r.items.some((t) => t.id === fromUrl) ? fromUrl : r.items[0]?.id ?? '');
      },
      setTenantsError,
    );
    return () => abortRef.current?.abort();
    // The tenant list is read once when the panel opens.
  }, [api]);

  function update(fn: (t: Turn) => Turn) {
    setTurns((ts) => ts.map((t, i) => (i === ts.length - 1 ? fn(t) : t)));
  }

  async function ask(e: FormEvent) {
    e.preventDefault();
    const q = question.trim();
    if (!q || !tenantId || streaming) return;
    setQuestion('');
    setTurns((ts) => [...ts, { question: q, answer: '', chips: [], streaming: true }]);
    const ctrl = new AbortController();
    abortRef.current = ctrl;
    // On the Analytics screen the question carries what it shows for this tenant; elsewhere the
    // last 24 hours and the free text.
    const now = new Date();
    const base =
      view && view.tenantId === tenantId
        ? view.snapshot
        : { from: new Date(now.getTime() - 24 * 3600 * 1000).toISOString(), to: now.toISOString() };
    const snapshot = withText(base, context);
    try {
      const res = await api.chat({ tenantId, question: q, snapshot }, ctrl.signal);
      if (!res.body) throw new Error('The answer had no body.');
      for await (const ev of readChatEvents(res.body)) {
        if (ev.type === 'delta') update((t) => ({ ...t, answer: t.answer + ev.text }));
        else if (ev.type === 'enrichment') {
          if (showsEnrichment(status, ev.kind)) update((t) => ({ ...t, chips: [...t.chips, ev] }));
        } else if (ev.type === 'done') update((t) => ({ ...t, model: ev.model || status.model }));
        else if (ev.type === 'error') update((t) => ({ ...t, error: `${ev.message} (${ev.code})` }));
      }
    } catch (err) {
      if (!ctrl.signal.aborted) {
        const x = err as { title?: string; detail?: string; message?: string };
        update((t) => ({ ...t, error: x.title ? `${x.title}${x.detail ? `: ${x.detail}` : ''}` : x.message ?? String(err) }));
      }
    } finally {
      update((t) => ({ ...t, streaming: false }));
      // The Ask button was disabled while streaming, which dropped focus: bring it back.
      setTimeout(() => questionRef.current?.focus(), 0);
    }
  }

  // Escape closes the panel wherever focus is, unless a modal dialog took it first.
  useEffect(() => {
    const onKey = (e: globalThis.KeyboardEvent) => {
      if (e.key === 'Escape' && !e.defaultPrevented && !document.querySelector('[aria-modal="true"]')) onClose();
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [onClose]);

  return (
    <aside className="chat" role="dialog" aria-modal="false" aria-labelledby="chat-title">
      <header className="chat-head">
        <h2 id="chat-title">Analytics assistant</h2>
        <span className="muted small">{status.model}</span>
        <span className="spacer" />
        <button type="button" className="btn btn-small" onClick={onClose} aria-label="Close analytics assistant">
          Close
        </button>
      </header>
      <div className="chat-log" aria-live="polite">
        {turns.length === 0 && (
          <p className="muted">
            Ask about the traffic and alerts of a tenant.{' '}
            {view ? 'The time range, addresses, signatures and CVEs shown on the Analytics screen are sent along as context.' : 'Open Analytics to send what it shows along as context.'}
          </p>
        )}
        {turns.map((t, i) => (
          <div key={i} className="turn">
            <p className="q">{t.question}</p>
            {t.chips.length > 0 && (
              <ul className="chips" aria-label="Enrichment">
                {t.chips.map((c, j) => (
                  <li key={j} className={`chip chip-${c.kind}`} title={c.detail}>
                    <strong>{c.title}</strong> <span className="mono">{c.indicator}</span>
                  </li>
                ))}
              </ul>
            )}
            <p className="a">{t.answer || (t.streaming ? '…' : '')}</p>
            {t.error && (
              <p className="form-error" role="alert">
                {t.error}
              </p>
            )}
            {t.model && <p className="muted small">Answered by {t.model}</p>}
          </div>
        ))}
      </div>
      <ErrorBanner error={tenantsError} />
      <form className="chat-form" onSubmit={ask}>
        <label htmlFor="chat-tenant">Tenant</label>
        <select id="chat-tenant" value={tenantId} onChange={(e) => setTenantId(e.target.value)} disabled={!tenants}>
          {tenants?.length === 0 && <option value="">No tenants</option>}
          {tenants?.map((t) => (
            <option key={t.id} value={t.id}>
              {t.name} ({t.id})
            </option>
          ))}
        </select>
        <label htmlFor="chat-question">Question</label>
        <textarea id="chat-question" ref={questionRef} rows={3} value={question} onChange={(e) => setQuestion(e.target.value)} />
        <label htmlFor="chat-context">Context (optional)</label>
        <input id="chat-context" value={context} onChange={(e) => setContext(e.target.value)} placeholder="Addresses, signatures, notes" />
        <button type="submit" className="btn btn-primary" disabled={streaming || !tenantId || !question.trim()}>
          {streaming ? 'Answering…' : 'Ask'}
        </button>
      </form>
    </aside>
  );
}
