// A secret the API shows exactly once (an API token, a claim code): a heading that takes the
// focus, the value with a copy button, and a Done button that forgets it. CopyText is the value
// and its button alone, for anything else worth copying.

import { useEffect, useRef, useState } from 'react';
import type { ReactNode } from 'react';

/** Text with a copy button that falls back to selecting the text when the clipboard is denied. */
export function CopyText({ value, testId, className = 'claim-code break', label = 'Copy', copiedText = 'Copied to clipboard.' }: { value: string; testId: string; className?: string; label?: string; copiedText?: string }) {
  const [copied, setCopied] = useState<'yes' | 'failed' | null>(null);
  const codeRef = useRef<HTMLElement>(null);

  useEffect(() => setCopied(null), [value]);

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
    <div className="code-row">
      <code ref={codeRef} className={className} data-testid={testId}>
        {value}
      </code>
      <button type="button" className="btn" onClick={copy}>
        {label}
      </button>
      <span role="status" className="muted">
        {copied === 'yes' ? copiedText : copied === 'failed' ? 'Copy failed: the text is selected, press Ctrl+C.' : ''}
      </span>
    </div>
  );
}

export function SecretOnce({
  title,
  value,
  children,
  onDismiss,
  testId,
  warning = 'This is shown only once. Copy it now and keep it somewhere safe; it cannot be read again.',
}: {
  title: string;
  value: string;
  children?: ReactNode;
  onDismiss: () => void;
  testId: string;
  warning?: string;
}) {
  const headingRef = useRef<HTMLHeadingElement>(null);

  useEffect(() => headingRef.current?.focus(), [value]);

  return (
    <div className="card issued">
      <h2 ref={headingRef} tabIndex={-1}>
        {title}
      </h2>
      <p className="warn-text">{warning}</p>
      <CopyText value={value} testId={testId} />
      {children}
      <button type="button" className="btn btn-small" onClick={onDismiss}>
        Done
      </button>
    </div>
  );
}
