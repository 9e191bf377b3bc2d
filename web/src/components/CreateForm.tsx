// A card form that creates one thing: its fields are checked once the user submits (touched), the
// button says it is working while the request runs, and a refusal shows as a banner under it.

import { useState } from 'react';
import type { FormEvent, ReactNode } from 'react';
import { ErrorBanner } from './Status';

export interface CreateState {
  /** Whether to show the fields' errors: after a submit, or once a field asks for it (on blur). */
  touched: boolean;
  setTouched: (touched: boolean) => void;
  busy: boolean;
  error: unknown;
  submit: (e: FormEvent) => Promise<void>;
}

/**
 * useCreate runs create when the form is submitted and valid, then hands its result to done (which
 * clears the fields); a failure is kept as the form's error.
 */
export function useCreate<T>(valid: boolean, create: () => Promise<T>, done: (result: T) => void): CreateState {
  const [touched, setTouched] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function submit(e: FormEvent) {
    e.preventDefault();
    setTouched(true);
    if (!valid) return;
    setBusy(true);
    setError(null);
    try {
      const result = await create();
      setTouched(false);
      done(result);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return { touched, setTouched, busy, error, submit };
}

export interface CreateFormProps {
  /** The heading's id, which labels the form. */
  titleId: string;
  title: string;
  submitLabel: string;
  /** The button's label while the request runs. */
  busyLabel?: string;
  state: CreateState;
  children: ReactNode;
}

export function CreateForm({ titleId, title, submitLabel, busyLabel = 'Creating…', state, children }: CreateFormProps) {
  return (
    <form className="card form-inline" onSubmit={state.submit} noValidate aria-labelledby={titleId}>
      <h2 id={titleId}>{title}</h2>
      {children}
      <button type="submit" className="btn btn-primary" disabled={state.busy}>
        {state.busy ? busyLabel : submitLabel}
      </button>
      <ErrorBanner error={state.error} />
    </form>
  );
}
