import { describe, expect, it } from 'vitest';
import { formatLabels, labelsPatch, parseLabels } from './labels';

describe('labels', () => {
  it('parses pairs separated by spaces or commas', () => {
    expect(parseLabels('site=ams, role=edge rack=')).toEqual({ labels: { site: 'ams', role: 'edge', rack: '' } });
    expect(parseLabels('')).toEqual({ labels: {} });
  });
  it('refuses what the API refuses, naming the key', () => {
    expect(parseLabels('Site=ams')).toHaveProperty('error', expect.stringContaining('"Site"'));
    expect(parseLabels('site=a/b')).toHaveProperty('error', expect.stringContaining('"site"'));
    expect(parseLabels('site')).toHaveProperty('error');
    expect(parseLabels('site=a site=b')).toHaveProperty('error', expect.stringContaining('twice'));
    expect(parseLabels(Array.from({ length: 17 }, (_, i) => `k${i}=v`).join(' '))).toHaveProperty('error', expect.stringContaining('16'));
  });
  it('formats sorted and patches by difference', () => {
    expect(formatLabels({ role: 'edge', site: 'ams' })).toBe('role=edge site=ams');
    expect(labelsPatch({ site: 'ams', role: 'edge' }, { site: 'fra', rack: 'r1' })).toEqual({ role: null, site: 'fra', rack: 'r1' });
  });
});
