import type { Tenant } from '../api/types';

/**
 * The tenant picker of a filter row. With allLabel, an empty choice means every tenant; a tenant
 * in the URL that the list does not hold (yet) stays choosable by its ID.
 */
export function TenantSelect({
  id,
  label = 'Tenant',
  value,
  tenants,
  allLabel,
  disabled,
  onChange,
}: {
  id: string;
  label?: string;
  value: string;
  tenants: Tenant[] | undefined;
  allLabel?: string;
  disabled?: boolean;
  onChange: (tenantId: string) => void;
}) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value)} disabled={disabled}>
        {allLabel !== undefined && <option value="">{allLabel}</option>}
        {allLabel === undefined && tenants?.length === 0 && <option value="">No tenants</option>}
        {tenants?.map((t) => (
          <option key={t.id} value={t.id}>
            {t.name} ({t.id})
          </option>
        ))}
        {value && tenants && !tenants.some((t) => t.id === value) && <option value={value}>{value}</option>}
        {value && !tenants && <option value={value}>{value}</option>}
      </select>
    </div>
  );
}
