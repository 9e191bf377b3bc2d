// A column header that sorts by its field: the first click ascending, the next descending. Sort
// orders are the API's: the field name, with a leading "-" for descending.

import type { ReactNode } from 'react';

export function sortField(sort: string): { field: string; desc: boolean } {
  return sort.startsWith('-') ? { field: sort.slice(1), desc: true } : { field: sort, desc: false };
}

export function nextSort(current: string, field: string): string {
  const s = sortField(current);
  return s.field === field && !s.desc ? `-${field}` : field;
}

export function SortHeader({ field, sort, onSort, children }: { field: string; sort: string; onSort: (sort: string) => void; children: ReactNode }) {
  const s = sortField(sort);
  const active = s.field === field;
  return (
    <th scope="col" aria-sort={active ? (s.desc ? 'descending' : 'ascending') : 'none'}>
      <button type="button" className="sort" onClick={() => onSort(nextSort(sort, field))}>
        {children}
        <span aria-hidden="true" className="sort-mark">
          {active ? (s.desc ? '▼' : '▲') : '↕'}
        </span>
      </button>
    </th>
  );
}
