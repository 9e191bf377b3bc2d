import { formatTime, relativeTime } from '../format';

export function Time({ value }: { value: string | null | undefined }) {
  if (!value) return <span className="muted">—</span>;
  const rel = relativeTime(value);
  return (
    <time dateTime={value} title={value}>
      {formatTime(value)}
      {rel && <span className="muted"> ({rel})</span>}
    </time>
  );
}
