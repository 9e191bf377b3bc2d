import { describe, expect, it } from 'vitest';
import type { Overview } from '../api/types';
import { SNAPSHOT_LIMIT_BYTES, snapshotOf, withText } from './snapshot';

function overview(n: number): Overview {
  const addrs = Array.from({ length: n }, (_, i) => ({ ip: `198.51.100.${i}`, count: n - i }));
  return {
    tenantId: 'acme',
    from: '2026-11-20T10:00:00Z',
    to: '2026-11-20T11:00:00Z',
    bucketSeconds: 60,
    totals: { events: 1, alerts: 1, sensors: 1 },
    series: [],
    topSources: addrs,
    topDestinations: addrs,
    topSignatures: Array.from({ length: n }, (_, i) => ({ signatureId: i, signature: `ET RULE ${i}`, category: 'c', severity: 1, count: 1 })),
    cves: [],
  };
}

describe('analytics snapshot', () => {
  it('keeps the range, the sensor and ten entries of each list', () => {
    const s = snapshotOf(overview(25), 's1');
    expect(s.from).toBe('2026-11-20T10:00:00Z');
    expect(s.sensorId).toBe('s1');
    expect(s.topSources).toHaveLength(10);
    expect(s.topSignatures).toHaveLength(10);
    expect(snapshotOf(overview(3))).not.toHaveProperty('sensorId');
  });

  it('adds the free text and stays under the server limit', () => {
    const huge = { ...snapshotOf(overview(10)), topSignatures: overview(400).topSignatures };
    const s = withText(huge, '  look at 198.51.100.1 '.repeat(400));
    expect(new TextEncoder().encode(JSON.stringify(s)).length).toBeLessThan(SNAPSHOT_LIMIT_BYTES);
    expect(s.text?.startsWith('look at 198.51.100.1')).toBe(true);
    expect(s.topSources).toHaveLength(10);
    expect(withText(snapshotOf(overview(2)), '   ')).not.toHaveProperty('text');
  });
});
