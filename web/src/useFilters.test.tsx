import { act, renderHook } from '@testing-library/react';
import type { ReactNode } from 'react';
import { MemoryRouter, useLocation } from 'react-router';
import { describe, expect, it } from 'vitest';
import { useFilters } from './useFilters';

function setup(initial: string) {
  const wrapper = ({ children }: { children: ReactNode }) => <MemoryRouter initialEntries={[initial]}>{children}</MemoryRouter>;
  return renderHook(() => ({ filters: useFilters(), location: useLocation() }), { wrapper });
}

describe('useFilters', () => {
  it('keeps both of two changes made before the next render', () => {
    // The audit screen's "clear the actor, then pick an action": on a busy machine the second
    // change was built from the query of the last render and brought the actor back.
    const { result } = setup('/audit?actor=viewer%40example.com');
    act(() => {
      result.current.filters.set({ actor: '' });
      result.current.filters.set({ action: 'operator.create' });
    });
    expect(result.current.location.search).toBe('?action=operator.create');
    expect(result.current.filters.get('actor')).toBe('');
    expect(result.current.filters.get('action')).toBe('operator.create');
  });

  it('builds on the rendered query once the router has caught up', () => {
    const { result } = setup('/audit?tenantId=acme');
    act(() => result.current.filters.set({ actor: 'a@example.com' }));
    act(() => result.current.filters.set({ tenantId: '' }));
    expect(result.current.location.search).toBe('?actor=a%40example.com');
  });
});
