// Sensor labels as the console reads and writes them: "key=value" pairs separated by spaces or
// commas, held to the API's rules (at most 16; keys 1-63 of a-z 0-9 . _ - starting with a letter or
// digit; values 0-63 of A-Z a-z 0-9 . _ -) so that a typo is shown before anything is sent.

export const MAX_LABELS = 16;
const KEY = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const VALUE = /^[A-Za-z0-9._-]{0,63}$/;

/** Parses "site=ams role=edge" into labels, or says what is wrong with it. */
export function parseLabels(text: string): { labels: Record<string, string> } | { error: string } {
  const labels: Record<string, string> = {};
  const parts = text.split(/[\s,]+/).filter(Boolean);
  for (const p of parts) {
    const eq = p.indexOf('=');
    if (eq < 0) return { error: `"${p}": write key=value` };
    const k = p.slice(0, eq);
    const v = p.slice(eq + 1);
    if (!KEY.test(k)) return { error: `key "${k}": 1 to 63 of a-z 0-9 . _ -, starting with a letter or digit` };
    if (!VALUE.test(v)) return { error: `key "${k}": its value takes up to 63 of A-Z a-z 0-9 . _ -` };
    if (k in labels) return { error: `key "${k}" is given twice` };
    labels[k] = v;
  }
  if (Object.keys(labels).length > MAX_LABELS) return { error: `at most ${MAX_LABELS} labels` };
  return { labels };
}

/** The labels as "key=value" text, sorted by key. */
export function formatLabels(labels: Record<string, string> | undefined): string {
  return Object.keys(labels ?? {})
    .sort()
    .map((k) => `${k}=${labels![k]}`)
    .join(' ');
}

/** The merge patch that turns labels from into to: changed keys set, missing ones null. */
export function labelsPatch(from: Record<string, string> | undefined, to: Record<string, string>): Record<string, string | null> {
  const patch: Record<string, string | null> = {};
  for (const k of Object.keys(from ?? {})) if (!(k in to)) patch[k] = null;
  for (const [k, v] of Object.entries(to)) if (from?.[k] !== v) patch[k] = v;
  return patch;
}

export function LabelChips({ labels }: { labels: Record<string, string> | undefined }) {
  const keys = Object.keys(labels ?? {}).sort();
  if (keys.length === 0) return <span className="muted">—</span>;
  return (
    <span className="labels">
      {keys.map((k) => (
        <span key={k} className="label-chip mono">
          {k}={labels![k]}
        </span>
      ))}
    </span>
  );
}
