// A search field that asks once the typing pauses (or at once on Enter), and follows the value
// it is given when that changes from outside (Back, a link).

import { useEffect, useRef, useState } from 'react';
import type { FormEvent } from 'react';
import { useDebounced } from '../useDebounced';

export const SEARCH_DEBOUNCE_MS = 300;

export function SearchBox({ id, label, value, placeholder, onSearch }: { id: string; label: string; value: string; placeholder?: string; onSearch: (q: string) => void }) {
  const [draft, setDraft] = useState(value);
  const settled = useDebounced(draft, SEARCH_DEBOUNCE_MS);
  const sent = useRef(value);

  function send(q: string) {
    if (q === sent.current) return;
    sent.current = q;
    onSearch(q);
  }

  useEffect(() => send(settled.trim()), [settled]);
  useEffect(() => {
    if (value !== sent.current) {
      sent.current = value;
      setDraft(value);
    }
  }, [value]);

  function submit(e: FormEvent) {
    e.preventDefault();
    send(draft.trim());
  }

  return (
    <form className="field field-search" role="search" onSubmit={submit}>
      <label htmlFor={id}>{label}</label>
      <input id={id} type="search" value={draft} placeholder={placeholder} autoComplete="off" spellCheck={false} onChange={(e) => setDraft(e.target.value)} />
    </form>
  );
}
