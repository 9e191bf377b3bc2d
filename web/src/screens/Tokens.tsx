// API tokens for automation (Authorization: Bearer rxc_…). Every operator manages their own; an
// admin may pick another operator (or all of them) to list, and create tokens for that operator. A
// token's grant lies within its creator's and its owner's; the token is shown once, then only its
// record (name, role, tenants, expiry) remains, and it can be revoked.

import { useState } from 'react';
import { useSearchParams } from 'react-router';
import { ROLES } from '../api/types';
import type { ApiToken, CreatedApiToken, Me, Operator, Role, Tenant } from '../api/types';
import { grantableRoles } from '../auth/access';
import { useAccess, useSession } from '../auth/session';
import { ConfirmDialog } from '../components/Dialog';
import { SecretOnce } from '../components/SecretOnce';
import { CreateForm, useCreate } from '../components/CreateForm';
import { ErrorBanner, Loading, Notice, StateBadge } from '../components/Status';
import { TenantChecks, TenantList } from '../components/TenantChecks';
import { Time } from '../components/Time';
import { isPast } from '../format';
import { usePolling } from '../usePolling';
import { ROLE_HELP } from './Operators';

const DAY = 86400;
export const LIFETIMES = [
  { label: '1 hour', seconds: 3600 },
  { label: '1 day', seconds: DAY },
  { label: '7 days', seconds: 7 * DAY },
  { label: '30 days', seconds: 30 * DAY },
  { label: '90 days', seconds: 90 * DAY },
  { label: '1 year', seconds: 365 * DAY },
];
const DEFAULT_LIFETIME = 90 * DAY;

/** The "all operators" choice of an admin's operator picker. */
const ALL = '*';

export function tokenState(t: ApiToken, now = Date.now()): 'revoked' | 'expired' | 'active' {
  if (t.revokedAt) return 'revoked';
  if (isPast(t.expiresAt, now)) return 'expired';
  return 'active';
}

const RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

/** The roles a token for owner may carry when me creates it: within both grants. */
export function tokenRoles(me: Me, owner: Pick<Operator, 'role'>): Role[] {
  return grantableRoles(me).filter((r) => RANK[r] <= RANK[owner.role]);
}

export function TokensScreen() {
  const { api } = useSession();
  const { me, can } = useAccess();
  const isAdmin = can('admin');
  const [params, setParams] = useSearchParams();
  const pick = isAdmin ? (params.get('operatorId') ?? '') : '';
  // '' lists the caller's own tokens; the API reads an empty operatorId as every operator's.
  const listFor = pick === '' ? undefined : pick === ALL ? '' : pick;
  const tokens = usePolling((_s) => api.listTokens(listFor), [api, listFor], null);
  const operators = usePolling((_s) => (isAdmin ? api.listOperators() : Promise.resolve({ items: [] as Operator[] })), [api, isAdmin], null);
  const tenants = usePolling((_s) => api.listTenants(), [api], null);
  const [created, setCreated] = useState<CreatedApiToken | null>(null);
  const [revoking, setRevoking] = useState<ApiToken | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  const ownerOp = pick && pick !== ALL ? operators.data?.items.find((o) => o.id === pick) : undefined;
  // The owner of new tokens: the picked operator, else the caller.
  const owner: Operator | Me = ownerOp ?? me;
  const emailOf = (id: string) => (id === me.id ? me.email : (operators.data?.items.find((o) => o.id === id)?.email ?? id));

  function choose(value: string) {
    const next = new URLSearchParams(params);
    if (value) next.set('operatorId', value);
    else next.delete('operatorId');
    setParams(next, { replace: true });
    setCreated(null);
    setNotice(null);
  }

  return (
    <section>
      <div className="page-head">
        <h1>API tokens</h1>
      </div>
      <p className="muted">
        Tokens let scripts call the API as <code>Authorization: Bearer rxc_…</code>, with the role and tenants chosen here (never more than their owner holds).
      </p>
      {isAdmin && (
        <div className="filters" role="group" aria-label="Owner">
          <div className="field">
            <label htmlFor="token-operator">Operator</label>
            <select id="token-operator" value={pick} onChange={(e) => choose(e.target.value)}>
              <option value="">Me ({me.email})</option>
              {operators.data?.items
                .filter((o) => o.id !== me.id)
                .map((o) => (
                  <option key={o.id} value={o.id}>
                    {o.email}
                  </option>
                ))}
              <option value={ALL}>All operators</option>
              {pick && pick !== ALL && !ownerOp && <option value={pick}>{pick}</option>}
            </select>
          </div>
        </div>
      )}
      {pick !== ALL && (!pick || ownerOp) && (
        <CreateToken
          key={owner.id}
          me={me}
          owner={owner}
          forOther={!!ownerOp && ownerOp.id !== me.id}
          tenants={tenants.data?.items}
          onCreated={(t) => {
            setCreated(t);
            setNotice(null);
            tokens.reload();
          }}
        />
      )}
      {created && (
        <SecretOnce title={`Token "${created.name}" created`} value={created.token} testId="api-token" onDismiss={() => setCreated(null)}>
          <p>
            {created.role} on <TenantList role={created.role} tenants={created.tenants} />; expires <Time value={created.expiresAt} />.
          </p>
        </SecretOnce>
      )}
      {notice && <Notice>{notice}</Notice>}

      <h2>{pick === ALL ? 'Every operator’s tokens' : ownerOp ? `Tokens of ${ownerOp.email}` : 'Your tokens'}</h2>
      <ErrorBanner error={tokens.error} onRetry={tokens.reload} />
      {tokens.loading && !tokens.data ? (
        <Loading label="Loading tokens…" />
      ) : tokens.data && tokens.data.items.length === 0 ? (
        <p className="empty">No API tokens yet.</p>
      ) : tokens.data ? (
        <div className="table-wrap">
          <table className="table">
            <caption className="sr-only">API tokens</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                {pick === ALL && <th scope="col">Operator</th>}
                <th scope="col">Role</th>
                <th scope="col">Tenants</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {tokens.data.items.map((t) => {
                const state = tokenState(t);
                return (
                  <tr key={t.id} data-token-id={t.id}>
                    <td>
                      {t.name}
                      <div className="muted small mono">{t.id}</div>
                    </td>
                    {pick === ALL && <td>{emailOf(t.operatorId)}</td>}
                    <td>{t.role}</td>
                    <td>
                      <TenantList role={t.role} tenants={t.tenants} />
                    </td>
                    <td>
                      <Time value={t.createdAt} />
                      {t.createdBy && t.createdBy !== emailOf(t.operatorId) && <div className="muted small">by {t.createdBy}</div>}
                    </td>
                    <td>
                      <Time value={t.expiresAt} />
                    </td>
                    <td>
                      <StateBadge state={state} />
                    </td>
                    <td className="actions">
                      {state === 'active' && (
                        <button type="button" className="btn btn-small btn-danger-outline" onClick={() => setRevoking(t)}>
                          Revoke<span className="sr-only"> token {t.name}</span>
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      ) : null}

      {revoking && (
        <ConfirmDialog
          title="Revoke API token?"
          confirmLabel="Revoke token"
          danger
          onClose={() => setRevoking(null)}
          onConfirm={async () => {
            await api.revokeToken(revoking.id);
            setNotice(`Token "${revoking.name}" revoked. Requests with it are refused from now on.`);
            if (created?.id === revoking.id) setCreated(null);
            tokens.reload();
          }}
        >
          <p>
            Token <strong>{revoking.name}</strong> (<span className="mono">{revoking.id}</span>) stops working at once. Scripts using it get 401.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function CreateToken({ me, owner, forOther, tenants, onCreated }: { me: Me; owner: Operator | Me; forOther: boolean; tenants: Tenant[] | undefined; onCreated: (t: CreatedApiToken) => void }) {
  const { api } = useSession();
  const roles = tokenRoles(me, owner);
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>(roles.includes('viewer') ? 'viewer' : roles[0]);
  const [grant, setGrant] = useState<string[]>([]);
  const [ttl, setTtl] = useState(String(DEFAULT_LIFETIME));
  const nameError = name.trim() === '' ? 'A name is required.' : [...name.trim()].length > 100 ? 'At most 100 characters.' : null;
  const effectiveRole = roles.includes(role) ? role : roles[roles.length - 1];
  // The tenants the owner holds (an admin holds all the caller sees).
  const offered = owner.role === 'admin' ? tenants : tenants?.filter((t) => owner.tenants.includes(t.id));

  const form = useCreate(
    !nameError,
    () =>
      api.createToken({
        name: name.trim(),
        role: effectiveRole,
        tenants: effectiveRole === 'admin' ? [] : grant,
        ttlSeconds: Number(ttl),
        ...(forOther ? { operatorId: owner.id } : {}),
      }),
    (t) => {
      setName('');
      setGrant([]);
      onCreated(t);
    },
  );
  const { touched } = form;

  return (
    <CreateForm titleId="create-token-title" title={forOther ? `New token for ${owner.email}` : 'New token'} submitLabel="Create token" state={form}>
      <div className="field">
        <label htmlFor="token-name">Name</label>
        <input id="token-name" value={name} onChange={(e) => setName(e.target.value)} autoComplete="off" aria-invalid={touched && !!nameError} placeholder="e.g. nightly export" />
        {touched && nameError && <span className="form-error">{nameError}</span>}
      </div>
      <div className="field">
        <label htmlFor="token-role">Role</label>
        <select id="token-role" value={effectiveRole} onChange={(e) => setRole(e.target.value as Role)} aria-describedby="token-role-help">
          {ROLES.filter((r) => roles.includes(r)).map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
        <span id="token-role-help" className="help">
          {ROLE_HELP[effectiveRole]}
        </span>
      </div>
      <div className="field">
        <label htmlFor="token-ttl">Lifetime</label>
        <select id="token-ttl" value={ttl} onChange={(e) => setTtl(e.target.value)}>
          {LIFETIMES.map((l) => (
            <option key={l.seconds} value={l.seconds}>
              {l.label}
            </option>
          ))}
        </select>
      </div>
      {effectiveRole !== 'admin' && <TenantChecks legend="Tenants" idPrefix="token-tenant" tenants={offered} value={grant} onChange={setGrant} />}
    </CreateForm>
  );
}
