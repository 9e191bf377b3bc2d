// A line chart drawn as plain SVG: a few series over equal time buckets, integer y ticks, x
// labels spaced to fit, a legend in HTML and a native tooltip per bucket. The console draws one
// chart, so a charting library (over 100 KB gzipped) bought nothing a page of SVG does not.
// Colours come from CSS classes (no inline styles: the console's CSP forbids them).

export type Series = { key: string; name: string; className: string };

type Props = {
  /** One row per bucket: its label and a value per series key. */
  rows: Array<{ label: string; values: Record<string, number> }>;
  series: Series[];
  width: number;
  height: number;
};

const MARGIN = { top: 8, right: 16, bottom: 28, left: 48 };
/** Width of a tick label in pixels at the chart's 12 px font, near enough to space them. */
const labelWidth = (label: string) => label.length * 7 + 16;

/** Integer ticks from 0 to a round number at or above max, at most about five of them. */
export function yTicks(max: number): number[] {
  if (max <= 0) return [0, 1];
  const raw = max / 4;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(1, [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? 10 * pow);
  const top = Math.ceil(max / step) * step;
  const ticks: number[] = [];
  for (let v = 0; v <= top; v += step) ticks.push(v);
  return ticks;
}

export function LineChart({ rows, series, width, height }: Props) {
  const w = Math.max(width, MARGIN.left + MARGIN.right + 10);
  const plotW = w - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const max = Math.max(0, ...rows.flatMap((r) => series.map((s) => r.values[s.key] ?? 0)));
  const ticks = yTicks(max);
  const top = ticks[ticks.length - 1];
  const n = rows.length;
  const x = (i: number) => MARGIN.left + (n <= 1 ? plotW / 2 : (i * plotW) / (n - 1));
  const y = (v: number) => MARGIN.top + plotH - (v / top) * plotH;
  const widest = Math.max(0, ...rows.map((r) => labelWidth(r.label)));
  const every = Math.max(1, Math.ceil(widest / (n <= 1 ? plotW : plotW / (n - 1))));
  const band = n <= 1 ? plotW : plotW / (n - 1);
  return (
    <>
      <svg className="line-chart" width={w} height={height} viewBox={`0 0 ${w} ${height}`} role="img" aria-label={series.map((s) => s.name).join(' and ') + ' per bucket'}>
        <g className="chart-grid">
          {ticks.map((t) => (
            <g key={t}>
              <line x1={MARGIN.left} x2={w - MARGIN.right} y1={y(t)} y2={y(t)} />
              <text className="chart-tick" x={MARGIN.left - 6} y={y(t)} dy="0.32em" textAnchor="end">
                {t.toLocaleString()}
              </text>
            </g>
          ))}
        </g>
        {rows.map((r, i) =>
          i % every === 0 && (n - 1 - i >= every || i === 0) ? (
            <text key={i} className="chart-tick" x={x(i)} y={height - 8} textAnchor={i === 0 ? 'start' : i === n - 1 ? 'end' : 'middle'}>
              {r.label}
            </text>
          ) : null,
        )}
        {series.map((s) => (
          <path
            key={s.key}
            className={`chart-line ${s.className}`}
            fill="none"
            d={rows.map((r, i) => `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${y(r.values[s.key] ?? 0).toFixed(1)}`).join(' ')}
          />
        ))}
        {rows.map((r, i) => (
          <rect key={i} className="chart-hover" x={x(i) - band / 2} y={MARGIN.top} width={band} height={plotH}>
            <title>{`${r.label}: ${series.map((s) => `${(r.values[s.key] ?? 0).toLocaleString()} ${s.name.toLowerCase()}`).join(', ')}`}</title>
          </rect>
        ))}
      </svg>
      <ul className="chart-legend">
        {series.map((s) => (
          <li key={s.key}>
            <span className={`chart-swatch ${s.className}`} aria-hidden="true" />
            {s.name}
          </li>
        ))}
      </ul>
    </>
  );
}
