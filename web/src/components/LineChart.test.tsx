import { render, screen } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { LineChart, yTicks } from './LineChart';

describe('yTicks', () => {
  it.each([
    [0, [0, 1]],
    [3, [0, 1, 2, 3]],
    [7, [0, 2, 4, 6, 8]],
    [30, [0, 10, 20, 30]],
    [1234, [0, 500, 1000, 1500]],
  ])('max %d gives %j', (max, want) => {
    expect(yTicks(max)).toEqual(want);
  });
});

describe('LineChart', () => {
  const rows = Array.from({ length: 24 }, (_, i) => ({ label: `${String(i).padStart(2, '0')}:00`, values: { events: i * 10, alerts: i % 3 } }));
  const series = [
    { key: 'events', name: 'Events', className: 'chart-events' },
    { key: 'alerts', name: 'Alerts', className: 'chart-alerts' },
  ];

  it('draws one line per series through every bucket, with a legend and a tooltip per bucket', () => {
    const { container } = render(<LineChart rows={rows} series={series} width={600} height={260} />);
    const paths = container.querySelectorAll('path.chart-line');
    expect(paths).toHaveLength(2);
    expect(paths[0].getAttribute('d')!.split(' ')).toHaveLength(24);
    // The last value, 230, on a scale of 0 to 300 (ticks of 100) in the plot between y 8 and 232.
    const last = paths[0].getAttribute('d')!.split(' ').at(-1)!;
    expect(Number(last.split(',')[1])).toBeCloseTo(8 + (260 - 8 - 28) * (1 - 230 / 300), 0);
    expect(screen.getAllByRole('listitem').map((li) => li.textContent)).toEqual(['Events', 'Alerts']);
    expect(container.querySelectorAll('rect.chart-hover title')[5].textContent).toBe('05:00: 50 events, 2 alerts');
  });

  it('keeps x labels apart at a narrow width', () => {
    const { container } = render(<LineChart rows={rows} series={series} width={300} height={260} />);
    const xs = Array.from(container.querySelectorAll('text.chart-tick'))
      .filter((t) => t.textContent!.includes(':'))
      .map((t) => Number(t.getAttribute('x')));
    expect(xs.length).toBeGreaterThan(1);
    expect(xs.length).toBeLessThan(24);
    for (let i = 1; i < xs.length; i++) expect(xs[i] - xs[i - 1]).toBeGreaterThanOrEqual(5 * 7 + 16);
  });

  it('uses no inline style (the console forbids them by CSP)', () => {
    const { container } = render(<LineChart rows={rows} series={series} width={600} height={260} />);
    expect(container.querySelectorAll('[style]')).toHaveLength(0);
  });
});
