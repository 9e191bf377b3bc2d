import { useState } from 'react';
import { Link } from 'react-router';
import { ID_PATTERN } from '../api/types';
import type { Tenant } from '../api/types';
import { useAccess, useSession } from '../auth/session';
import { CreateForm, useCreate } from '../components/CreateForm';
import { ErrorBanner, Loading, Notice, StateBadge } from '../components/Status';
import { usePolling } from '../usePolling';

export function TenantsScreen() {
  const { api } = useSession();
  const { can } = useAccess();
  const isAdmin = can('admin');
  // Provisioning of a tenant's NATS account finishes in the background: keep the list fresh.
  const tenants = usePolling((_signal) => api.listTenants(), [api], 5000);
  const [created, setCreated] = useState<Tenant | null>(null);

  return (
    <section>
      <div className="page-head">
        <h1>Tenants</h1>
      </div>
      {isAdmin && (
        <CreateTenant
          onCreated={(t) => {
            setCreated(t);
            tenants.reload();
          }}
        />
      )}
      {created && (
        <Notice>
          Tenant <Link to={`/tenants/${encodeURIComponent(created.id)}`}>{created.id}</Link> created; NATS account {created.natsStatus}.
        </Notice>
      )}
      <ErrorBanner error={tenants.error} onRetry={tenants.reload} />
      {tenants.loading && !tenants.data ? (
        <Loading label="Loading tenants…" />
      ) : tenants.data && tenants.data.items.length === 0 ? (
        <p className="empty">{isAdmin ? 'No tenants yet. Create the first one above.' : 'No tenant is granted to you yet. An admin can grant you tenants.'}</p>
      ) : tenants.data ? (
        <div className="table-wrap">
          <table className="table">
            <caption className="sr-only">Tenants</caption>
            <thead>
              <tr>
                <th scope="col">ID</th>
                <th scope="col">Name</th>
                <th scope="col">NATS account</th>
                <th scope="col">Account public key</th>
              </tr>
            </thead>
            <tbody>
              {tenants.data.items.map((t) => (
                <tr key={t.id}>
                  <td>
                    <Link to={`/tenants/${encodeURIComponent(t.id)}`}>{t.id}</Link>
                  </td>
                  <td>{t.name}</td>
                  <td>
                    <StateBadge state={t.natsStatus} />
                  </td>
                  <td className="mono truncate" title={t.natsAccountPubKey ?? ''}>
                    {t.natsAccountPubKey || <span className="muted">not yet</span>}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}

export function tenantIdError(id: string): string | null {
  if (id === '') return 'An ID is required.';
  if (!ID_PATTERN.test(id)) return 'Use 1–64 letters, digits, "_" or "-", starting with a letter or digit.';
  return null;
}

function CreateTenant({ onCreated }: { onCreated: (t: Tenant) => void }) {
  const { api } = useSession();
  const [id, setId] = useState('');
  const [name, setName] = useState('');
  const idError = tenantIdError(id);
  const form = useCreate(
    !idError && name.trim() !== '',
    () => api.createTenant(id, name.trim()),
    (t) => {
      setId('');
      setName('');
      onCreated(t);
    },
  );
  const { touched, setTouched } = form;

  return (
    <CreateForm titleId="create-tenant-title" title="New tenant" submitLabel="Create tenant" state={form}>
      <div className="field">
        <label htmlFor="tenant-id">ID</label>
        <input
          id="tenant-id"
          value={id}
          onChange={(e) => setId(e.target.value)}
          onBlur={() => setTouched(true)}
          aria-invalid={touched && !!idError}
          aria-describedby="tenant-id-help"
          autoComplete="off"
          spellCheck={false}
        />
        <span id="tenant-id-help" className={touched && idError ? 'form-error' : 'help'}>
          {touched && idError ? idError : 'Letters, digits, "_" and "-"; used in NATS subjects.'}
        </span>
      </div>
      <div className="field">
        <label htmlFor="tenant-name">Name</label>
        <input id="tenant-name" value={name} onChange={(e) => setName(e.target.value)} aria-invalid={touched && name.trim() === ''} />
        {touched && name.trim() === '' && <span className="form-error">A name is required.</span>}
      </div>
    </CreateForm>
  );
}
