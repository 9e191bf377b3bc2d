// Labels, renaming, decommissioning and the batches screen against a scripted control plane:
// what is sent (the label filter, the merge patch, the DELETE) and what is shown.

import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import type { Me, Sensor } from '../api/types';
import { fakeFetch, json, problem, renderApp } from '../test-utils';

const OPERATOR: Me = { id: 'op-o', email: 'ops@example.com', role: 'operator', tenants: ['acme'] };

function sensorApi() {
  const sensor: Sensor = { id: 's-1', tenantId: 'acme', name: 'edge-1', state: 'running', labels: { site: 'ams', role: 'edge' }, decommissionedAt: null };
  const f = fakeFetch({
    'GET /api/auth/me': () => json(200, OPERATOR),
    'GET /api/tenants': () => json(200, { items: [{ id: 'acme', name: 'Acme', natsStatus: 'provisioned' }] }),
    'GET /api/sensors/summary': () => json(200, { total: 1, byState: { running: 1 } }),
    'GET /api/sensors': ({ url }) => {
      const want = url.searchParams.getAll('label').map((l) => l.split('='));
      const ok = !sensor.decommissionedAt && want.every(([k, v]) => sensor.labels?.[k] === v);
      return json(200, { items: ok ? [sensor] : [], nextCursor: null });
    },
    'GET /api/sensors/s-1': () => json(200, sensor),
    'GET /api/sensors/s-1/commands': () => json(200, { items: [], nextCursor: null }),
    'PATCH /api/sensors/s-1': ({ body }) => {
      const b = body as { name?: string; labels?: Record<string, string | null> };
      if (b.labels && Object.keys(b.labels).some((k) => k !== k.toLowerCase())) return problem(400, 'invalid_labels', 'Invalid labels', 'key');
      if (b.name) sensor.name = b.name;
      const labels = { ...sensor.labels };
      for (const [k, v] of Object.entries(b.labels ?? {})) {
        if (v === null) delete labels[k];
        else labels[k] = v;
      }
      sensor.labels = labels;
      return json(200, sensor);
    },
    'DELETE /api/sensors/s-1': () => {
      sensor.decommissionedAt = '2026-01-01T00:00:00Z';
      sensor.state = 'revoked';
      return new Response(null, { status: 204 });
    },
    'GET /api/commands/batches': () =>
      json(200, {
        items: [
          { batchId: 'b-2', action: 'stop', createdAt: '2026-01-02T00:00:00Z', createdBy: 'ops@example.com', tenantIds: ['acme'], matched: 3, total: 2, skippedRevoked: 1, skippedNotEnrolled: 0, pending: 0, accepted: 2, acknowledged: 1, refused: 0, failed: 0, expired: 0, done: true },
          { batchId: 'b-1', action: 'start', createdAt: '2026-01-01T00:00:00Z', createdBy: 'ops@example.com', tenantIds: ['acme'], matched: 1, total: 1, skippedRevoked: 0, skippedNotEnrolled: 0, pending: 0, accepted: 1, acknowledged: 1, refused: 0, failed: 0, expired: 0, done: true },
        ],
        nextCursor: null,
      }),
  });
  return { f, sensor };
}

describe('sensor lifecycle in the console', () => {
  it('shows labels and filters by them, every label in the request', async () => {
    const { f } = sensorApi();
    renderApp('/sensors?labels=site%3Dams+role%3Dedge', f);
    const row = await screen.findByRole('link', { name: 'edge-1' });
    expect(row.closest('tr')).toHaveTextContent('site=ams');
    const call = f.calls.filter((c) => c.url.pathname === '/api/sensors').at(-1)!;
    expect(call.url.searchParams.getAll('label').sort()).toEqual(['role=edge', 'site=ams']);
  });

  it('says what is wrong with a label filter instead of sending it', async () => {
    const { f } = sensorApi();
    renderApp('/sensors?labels=Site%3Dams', f);
    expect(await screen.findByRole('alert')).toHaveTextContent('"Site"');
    await screen.findByRole('link', { name: 'edge-1' });
    expect(f.calls.filter((c) => c.url.pathname === '/api/sensors').every((c) => c.url.searchParams.getAll('label').length === 0)).toBe(true);
  });

  it('renames and relabels with a merge patch', async () => {
    const user = userEvent.setup();
    const { f } = sensorApi();
    renderApp('/sensors/s-1', f);
    const group = await screen.findByRole('group', { name: 'Sensor actions' });
    await user.click(within(group).getByRole('button', { name: 'Edit' }));
    const form = screen.getByRole('form', { name: 'Edit sensor' });
    await user.clear(within(form).getByLabelText('Name'));
    await user.type(within(form).getByLabelText('Name'), 'edge-ams-1');
    await user.clear(within(form).getByLabelText('Labels'));
    await user.type(within(form).getByLabelText('Labels'), 'Site=x');
    expect(within(form).getByRole('alert')).toHaveTextContent('"Site"');
    expect(within(form).getByRole('button', { name: 'Save' })).toBeDisabled();
    await user.clear(within(form).getByLabelText('Labels'));
    await user.type(within(form).getByLabelText('Labels'), 'site=ams rack=r12');
    await user.click(within(form).getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(f.calls.some((c) => c.method === 'PATCH')).toBe(true));
    expect(f.calls.find((c) => c.method === 'PATCH')!.body).toEqual({ name: 'edge-ams-1', labels: { role: null, rack: 'r12' } });
    expect(await screen.findByText('Name and labels saved.')).toBeInTheDocument();
    await waitFor(() => expect(screen.getByTestId('labels')).toHaveTextContent('rack=r12'));
  });

  it('decommissions only after a confirmation that says what it does', async () => {
    const user = userEvent.setup();
    const { f } = sensorApi();
    renderApp('/sensors/s-1', f);
    const group = await screen.findByRole('group', { name: 'Sensor actions' });
    await user.click(within(group).getByRole('button', { name: 'Decommission' }));
    const dialog = screen.getByRole('dialog', { name: 'Decommission sensor?' });
    expect(dialog).toHaveTextContent('can never be enrolled again');
    expect(f.calls.some((c) => c.method === 'DELETE')).toBe(false);
    await user.click(within(dialog).getByRole('button', { name: 'Decommission sensor' }));
    await waitFor(() => expect(f.calls.some((c) => c.method === 'DELETE' && c.url.pathname === '/api/sensors/s-1')).toBe(true));
    expect(await screen.findByRole('heading', { name: 'Sensors' })).toBeInTheDocument();
  });

  it('lists past batches, newest first, with where each stands', async () => {
    const { f } = sensorApi();
    renderApp('/batches', f);
    await screen.findByRole('heading', { name: 'Command batches' });
    const rows = await screen.findAllByTestId('batch-outcome');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toHaveTextContent('1 acknowledged');
    expect(screen.getByText('1 skipped (revoked or never enrolled)')).toBeInTheDocument();
    // b-2 waits for one sensor's answer: it can be followed; b-1 is settled.
    expect(within(rows[0]).getByRole('button', { name: 'Follow' })).toBeInTheDocument();
    expect(within(rows[1]).queryByRole('button', { name: 'Follow' })).toBeNull();
  });
});
