// A secret the API shows exactly once (an API token): a heading that takes the focus, the value,
// a copy button that falls back to selecting the text, and a Done button that forgets it.

import { useEffect, useRef, useState } from 'react';
import type { ReactNode } from 'react';

export function SecretOnce({ title, value, children, onDismiss, testId }: { title: string; value: string; children?: ReactNode; onDismiss: () => void; testId: string }) {
  const [copied, setCopied] = useState<'yes' | 'failed' | null>(null);
  const codeRef = useRef<HTMLElement>(null);
  const headingRef = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    headingRef.current?.focus();
    setCopied(null);
  }, [value]);

  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('yes');
    } catch {
      const sel = window.getSelection();
      if (sel && codeRef.current) {
        const range = document.createRange();
        range.selectNodeContents(codeRef.current);
        sel.removeAllRanges();
        sel.addRange(range);
      }
      setCopied('failed');
    }
  }

  return (
    <div className="card issued">
      <h2 ref={headingRef} tabIndex={-1}>
        {title}
      </h2>
      <p className="warn-text">This is shown only once. Copy it now and keep it somewhere safe; it cannot be read again.</p>
      <div className="code-row">
        <code ref={codeRef} className="claim-code break" data-testid={testId}>
          {value}
        </code>
        <button type="button" className="btn" onClick={copy}>
          Copy
        </button>
        <span role="status" className="muted">
          {copied === 'yes' ? 'Copied to clipboard.' : copied === 'failed' ? 'Copy failed: the text is selected, press Ctrl+C.' : ''}
        </span>
      </div>
      {children}
      <button type="button" className="btn btn-small" onClick={onDismiss}>
        Done
      </button>
    </div>
  );
}
