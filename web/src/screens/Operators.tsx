// Operators (admins only): list, create with an initial password, role and tenants; change role and
// tenants; disable (ends their sessions, their API tokens stop working) and enable; reset a password
// (ends their sessions); sign out everywhere. The API refuses to demote or disable the last enabled
// admin (409 last_admin); the console says so in words.

import { useState } from 'react';
import { ROLES } from '../api/types';
import type { Operator, Role, Tenant } from '../api/types';
import { Link } from 'react-router';
import { useAccess, useSession } from '../auth/session';
import { ConfirmDialog } from '../components/Dialog';
import { CreateForm, useCreate } from '../components/CreateForm';
import { ErrorBanner, Loading, Notice, StateBadge } from '../components/Status';
import { TenantChecks, TenantList } from '../components/TenantChecks';
import { Time } from '../components/Time';
import { usePolling } from '../usePolling';
import { SignInSettings } from './SignInSettings';

/** The control plane's minimum (core/operators: MinPasswordLen). */
export const MIN_PASSWORD = 12;

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function passwordError(p: string): string | null {
  if ([...p].length < MIN_PASSWORD) return `At least ${MIN_PASSWORD} characters.`;
  return null;
}

export const ROLE_HELP: Record<Role, string> = {
  admin: 'everything on every tenant, operators included',
  operator: 'commands, claim codes and revocation on the tenants granted',
  viewer: 'read-only on the tenants granted',
};

type Pending =
  | { kind: 'edit'; op: Operator }
  | { kind: 'resetTotp'; op: Operator }
  | { kind: 'disable'; op: Operator }
  | { kind: 'enable'; op: Operator }
  | { kind: 'password'; op: Operator }
  | { kind: 'signOut'; op: Operator };

export function OperatorsScreen() {
  const { api } = useSession();
  const { me, can } = useAccess();
  const isAdmin = can('admin');
  const operators = usePolling((_s) => (isAdmin ? api.listOperators() : Promise.resolve({ items: [] })), [api, isAdmin], null);
  const tenants = usePolling((_s) => (isAdmin ? api.listTenants() : Promise.resolve({ items: [] })), [api, isAdmin], null);
  const [pending, setPending] = useState<Pending | null>(null);
  const [notice, setNotice] = useState<string | null>(null);

  if (!isAdmin) {
    return (
      <section>
        <div className="page-head">
          <h1>Operators</h1>
        </div>
        <ErrorBanner error={{ title: 'Not allowed', detail: 'Only admins manage operators.' }} />
      </section>
    );
  }

  return (
    <section>
      <div className="page-head">
        <h1>Operators</h1>
      </div>
      <CreateOperator
        tenants={tenants.data?.items}
        onCreated={(o) => {
          setNotice(`Operator ${o.email} created as ${o.role}. Hand them the initial password over a safe channel.`);
          operators.reload();
        }}
      />
      {notice && <Notice>{notice}</Notice>}
      <ErrorBanner error={operators.error} onRetry={operators.reload} />
      {operators.loading && !operators.data ? (
        <Loading label="Loading operators…" />
      ) : operators.data ? (
        <div className="table-wrap">
          <table className="table">
            <caption className="sr-only">Operators</caption>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Tenants</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {operators.data.items.map((o) => (
                <tr key={o.id} data-operator-id={o.id}>
                  <td>
                    {o.email}
                    {o.id === me.id && <span className="muted small"> (you)</span>}
                  </td>
                  <td>{o.role}</td>
                  <td>
                    <TenantList role={o.role} tenants={o.tenants} />
                  </td>
                  <td>
                    <StateBadge state={o.disabled ? 'disabled' : 'enabled'} />
                    {o.secondFactor && <span className="muted small"> · two-factor</span>}
                  </td>
                  <td>
                    <Time value={o.createdAt} />
                  </td>
                  <td className="actions">
                    <button type="button" className="btn btn-small" onClick={() => setPending({ kind: 'edit', op: o })}>
                      Edit<span className="sr-only"> {o.email}</span>
                    </button>
                    {o.id === me.id ? (
                      // One's own password needs the current one: changed on the Account screen.
                      <Link className="btn btn-small" to="/account">
                        Change password<span className="sr-only"> (your account)</span>
                      </Link>
                    ) : (
                      <button type="button" className="btn btn-small" onClick={() => setPending({ kind: 'password', op: o })}>
                        Reset password<span className="sr-only"> of {o.email}</span>
                      </button>
                    )}
                    {o.secondFactor && (
                      <button type="button" className="btn btn-small" onClick={() => setPending({ kind: 'resetTotp', op: o })}>
                        Reset two-factor<span className="sr-only"> of {o.email}</span>
                      </button>
                    )}
                    <button type="button" className="btn btn-small" onClick={() => setPending({ kind: 'signOut', op: o })}>
                      Sign out everywhere<span className="sr-only"> {o.email}</span>
                    </button>
                    {o.disabled ? (
                      <button type="button" className="btn btn-small" onClick={() => setPending({ kind: 'enable', op: o })}>
                        Enable<span className="sr-only"> {o.email}</span>
                      </button>
                    ) : (
                      <button type="button" className="btn btn-small btn-danger-outline" onClick={() => setPending({ kind: 'disable', op: o })}>
                        Disable<span className="sr-only"> {o.email}</span>
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}

      {pending?.kind === 'edit' && (
        <EditOperator
          op={pending.op}
          tenants={tenants.data?.items}
          onClose={() => setPending(null)}
          onSaved={(o) => {
            setNotice(`${o.email} is now ${o.role}${o.role === 'admin' ? '' : ` on ${o.tenants.length === 0 ? 'no tenants' : o.tenants.join(', ')}`}.`);
            operators.reload();
          }}
        />
      )}
      {pending?.kind === 'password' && (
        <ResetPassword
          op={pending.op}
          onClose={() => setPending(null)}
          onDone={() => {
            setNotice(`Password of ${pending.op.email} reset; their sessions ended.`);
            operators.reload();
          }}
        />
      )}
      {pending?.kind === 'disable' && (
        <ConfirmDialog
          title="Disable operator?"
          confirmLabel="Disable"
          danger
          onClose={() => setPending(null)}
          onConfirm={async () => {
            await api.updateOperator(pending.op.id, { disabled: true });
            setNotice(`${pending.op.email} disabled: signed out everywhere, their API tokens stop working.`);
            operators.reload();
          }}
        >
          <p>
            <strong>{pending.op.email}</strong> can no longer sign in; their sessions end now and their API tokens stop working until they are enabled again.
          </p>
        </ConfirmDialog>
      )}
      {pending?.kind === 'enable' && (
        <ConfirmDialog
          title="Enable operator?"
          confirmLabel="Enable"
          onClose={() => setPending(null)}
          onConfirm={async () => {
            await api.updateOperator(pending.op.id, { disabled: false });
            setNotice(`${pending.op.email} enabled.`);
            operators.reload();
          }}
        >
          <p>
            <strong>{pending.op.email}</strong> can sign in again with their password, and their unexpired API tokens work again.
          </p>
        </ConfirmDialog>
      )}
      {pending?.kind === 'resetTotp' && (
        <ConfirmDialog
          title="Reset two-factor authentication?"
          confirmLabel="Reset two-factor"
          danger
          onClose={() => setPending(null)}
          onConfirm={async () => {
            await api.resetTotp(pending.op.id);
            setNotice(`Two-factor authentication of ${pending.op.email} removed: they sign in with their password and should set it up again.`);
            operators.reload();
          }}
        >
          <p>
            For a lost device: <strong>{pending.op.email}</strong> signs in with the password alone until they set up two-factor authentication again; their recovery codes stop working.
          </p>
        </ConfirmDialog>
      )}
      {pending?.kind === 'signOut' && (
        <ConfirmDialog
          title="Sign out everywhere?"
          confirmLabel="Sign out everywhere"
          danger
          onClose={() => setPending(null)}
          onConfirm={async () => {
            const { sessions } = await api.signOutEverywhere(pending.op.id);
            setNotice(`${pending.op.email}: ${sessions} ${sessions === 1 ? 'session' : 'sessions'} ended.`);
          }}
        >
          <p>
            Every session of <strong>{pending.op.email}</strong> ends now{pending.op.id === me.id ? ', this one included' : ''}. API tokens are not affected: revoke them on the API tokens screen.
          </p>
        </ConfirmDialog>
      )}
      <SignInSettings />
    </section>
  );
}

function RoleSelect({ id, value, onChange }: { id: string; value: Role; onChange: (r: Role) => void }) {
  return (
    <div className="field">
      <label htmlFor={id}>Role</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value as Role)} aria-describedby={`${id}-help`}>
        {ROLES.map((r) => (
          <option key={r} value={r}>
            {r}
          </option>
        ))}
      </select>
      <span id={`${id}-help`} className="help">
        {ROLE_HELP[value]}
      </span>
    </div>
  );
}

function CreateOperator({ tenants, onCreated }: { tenants: Tenant[] | undefined; onCreated: (o: Operator) => void }) {
  const { api } = useSession();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState<Role>('viewer');
  const [grant, setGrant] = useState<string[]>([]);
  const emailError = EMAIL.test(email.trim()) ? null : 'An email address is required.';
  const pwError = passwordError(password);
  const form = useCreate(
    !emailError && !pwError,
    () => api.createOperator({ email: email.trim(), password, role, tenants: role === 'admin' ? [] : grant }),
    (o) => {
      setEmail('');
      setPassword('');
      setGrant([]);
      onCreated(o);
    },
  );
  const { touched } = form;

  return (
    <CreateForm titleId="create-operator-title" title="New operator" submitLabel="Create operator" state={form}>
      <div className="field">
        <label htmlFor="operator-email">Email</label>
        <input id="operator-email" type="email" autoComplete="off" value={email} onChange={(e) => setEmail(e.target.value)} aria-invalid={touched && !!emailError} />
        {touched && emailError && <span className="form-error">{emailError}</span>}
      </div>
      <div className="field">
        <label htmlFor="operator-password">Initial password</label>
        <input
          id="operator-password"
          type="password"
          autoComplete="new-password"
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          aria-invalid={touched && !!pwError}
          aria-describedby="operator-password-help"
        />
        <span id="operator-password-help" className={touched && pwError ? 'form-error' : 'help'}>
          {touched && pwError ? pwError : `At least ${MIN_PASSWORD} characters; they can change it later.`}
        </span>
      </div>
      <RoleSelect id="operator-role" value={role} onChange={setRole} />
      {role !== 'admin' && <TenantChecks legend="Tenants" idPrefix="operator-tenant" tenants={tenants} value={grant} onChange={setGrant} />}
    </CreateForm>
  );
}

function EditOperator({ op, tenants, onClose, onSaved }: { op: Operator; tenants: Tenant[] | undefined; onClose: () => void; onSaved: (o: Operator) => void }) {
  const { api } = useSession();
  const [role, setRole] = useState<Role>(op.role);
  const [grant, setGrant] = useState<string[]>(op.tenants);
  return (
    <ConfirmDialog
      title={`Role and tenants of ${op.email}`}
      confirmLabel="Save"
      onClose={onClose}
      onConfirm={async () => {
        onSaved(await api.updateOperator(op.id, { role, tenants: role === 'admin' ? [] : grant }));
      }}
    >
      <RoleSelect id="edit-role" value={role} onChange={setRole} />
      {role === 'admin' ? <p className="muted small">Admins see every tenant.</p> : <TenantChecks legend="Tenants" idPrefix="edit-tenant" tenants={tenants} value={grant} onChange={setGrant} />}
      <p className="muted small">Their API tokens are narrowed to the new grant at once.</p>
    </ConfirmDialog>
  );
}

function ResetPassword({ op, onClose, onDone }: { op: Operator; onClose: () => void; onDone: () => void }) {
  const { api } = useSession();
  const [password, setPassword] = useState('');
  const error = passwordError(password);
  return (
    <ConfirmDialog
      title={`Reset password of ${op.email}`}
      confirmLabel="Set password"
      danger
      confirmDisabled={!!error}
      onClose={onClose}
      onConfirm={async () => {
        await api.resetPassword(op.id, password);
        onDone();
      }}
    >
      <div className="field">
        <label htmlFor="reset-password">New password</label>
        <input id="reset-password" type="password" autoComplete="new-password" value={password} onChange={(e) => setPassword(e.target.value)} aria-describedby="reset-password-help" />
        <span id="reset-password-help" className="help">
          At least {MIN_PASSWORD} characters. Their sessions end; API tokens are not affected.
        </span>
      </div>
    </ConfirmDialog>
  );
}
