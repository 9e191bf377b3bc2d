// Picks tenants for a grant (an operator's or an API token's): one checkbox per tenant the signed-in
// principal sees. A grant may also name a tenant not in the list (e.g. one an admin granted before it
// was created); such tenants stay listed so that saving does not drop them silently.

import type { Tenant } from '../api/types';

export function TenantChecks({
  legend,
  tenants,
  value,
  onChange,
  idPrefix,
}: {
  legend: string;
  tenants: Tenant[] | undefined;
  value: string[];
  onChange: (next: string[]) => void;
  idPrefix: string;
}) {
  const ids = [...(tenants ?? []).map((t) => t.id), ...value.filter((v) => !tenants?.some((t) => t.id === v))];
  const names = new Map((tenants ?? []).map((t) => [t.id, t.name]));
  function toggle(id: string, on: boolean) {
    onChange(on ? [...value, id].filter((v, i, a) => a.indexOf(v) === i) : value.filter((v) => v !== id));
  }
  return (
    <fieldset className="checks">
      <legend>{legend}</legend>
      {tenants === undefined && ids.length === 0 ? (
        <span className="muted small">Loading tenants…</span>
      ) : ids.length === 0 ? (
        <span className="muted small">No tenants to grant.</span>
      ) : (
        ids.map((id) => (
          <label key={id} htmlFor={`${idPrefix}-${id}`}>
            <input id={`${idPrefix}-${id}`} type="checkbox" checked={value.includes(id)} onChange={(e) => toggle(id, e.target.checked)} />
            {names.get(id) && names.get(id) !== id ? `${names.get(id)} (${id})` : id}
          </label>
        ))
      )}
    </fieldset>
  );
}

/** The tenants of a grant as text: every tenant for an admin. */
export function TenantList({ role, tenants }: { role: string; tenants: string[] }) {
  if (role === 'admin') return <span className="muted">all tenants</span>;
  if (tenants.length === 0) return <span className="muted">none</span>;
  return (
    <span className="tags">
      {tenants.map((t) => (
        <span key={t} className="chip">
          {t}
        </span>
      ))}
    </span>
  );
}
