import { useState } from 'react';
import { Link, useParams } from 'react-router';
import type { ClaimCode, IssuedClaimCode } from '../api/types';
import { useAccess, useSession } from '../auth/session';
import { ConfirmDialog } from '../components/Dialog';
import { CopyText, SecretOnce } from '../components/SecretOnce';
import { CreateForm, useCreate } from '../components/CreateForm';
import { ErrorBanner, Loading, Notice, StateBadge } from '../components/Status';
import { Time } from '../components/Time';
import { isPast } from '../format';
import { usePolling } from '../usePolling';

const TTL_CHOICES = [
  { label: '1 hour', seconds: 3600 },
  { label: '24 hours', seconds: 86400 },
  { label: '7 days', seconds: 604800 },
];

export function claimCodeState(c: ClaimCode, now = Date.now()): 'revoked' | 'used' | 'expired' | 'active' {
  if (c.revoked || c.revokedAt) return 'revoked';
  if (c.used || c.usedAt) return 'used';
  if (isPast(c.expiresAt, now)) return 'expired';
  return 'active';
}

export function TenantDetailScreen() {
  const { tenantId = '' } = useParams();
  const { api } = useSession();
  const { can } = useAccess();
  const mayOperate = can('operate', tenantId);
  const tenants = usePolling((_s) => api.listTenants(), [api], null);
  const codes = usePolling((_s) => api.listClaimCodes(tenantId), [api, tenantId], 10000);
  const [issued, setIssued] = useState<IssuedClaimCode | null>(null);
  const [revoking, setRevoking] = useState<ClaimCode | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const tenant = tenants.data?.items.find((t) => t.id === tenantId);

  return (
    <section>
      <nav aria-label="Breadcrumb" className="crumbs">
        <Link to="/tenants">Tenants</Link> / <span aria-current="page">{tenantId}</span>
      </nav>
      <div className="page-head">
        <h1>{tenant ? tenant.name : tenantId}</h1>
        {tenant && <StateBadge state={tenant.natsStatus} />}
        <span className="spacer" />
        <Link className="btn" to={`/sensors?tenantId=${encodeURIComponent(tenantId)}`}>
          View sensors
        </Link>
      </div>
      {tenants.data && !tenant && <ErrorBanner error={{ title: 'Unknown tenant', detail: `No tenant has the ID "${tenantId}".` }} />}
      <ErrorBanner error={tenants.error} onRetry={tenants.reload} />

      {mayOperate && (
        <IssueClaimCode
          tenantId={tenantId}
          onIssued={(c) => {
            setIssued(c);
            setNotice(null);
            codes.reload();
          }}
        />
      )}
      {issued && <IssuedCode code={issued} onDismiss={() => setIssued(null)} />}
      {notice && <Notice>{notice}</Notice>}

      <h2>Claim codes</h2>
      <ErrorBanner error={codes.error} onRetry={codes.reload} />
      {codes.loading && !codes.data ? (
        <Loading label="Loading claim codes…" />
      ) : codes.data && codes.data.items.length === 0 ? (
        <p className="empty">No claim codes for this tenant.</p>
      ) : codes.data ? (
        <div className="table-wrap">
          <table className="table">
            <caption className="sr-only">Claim codes</caption>
            <thead>
              <tr>
                <th scope="col">ID</th>
                <th scope="col">Sensor name</th>
                <th scope="col">Expires</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {codes.data.items.map((c) => {
                const state = claimCodeState(c);
                return (
                  <tr key={c.id}>
                    <td className="mono">{c.id}</td>
                    <td>{c.sensorName || <span className="muted">any</span>}</td>
                    <td>
                      <Time value={c.expiresAt} />
                    </td>
                    <td>
                      <StateBadge state={state} />
                    </td>
                    <td className="actions">
                      {state === 'active' && mayOperate && (
                        <button type="button" className="btn btn-small btn-danger-outline" onClick={() => setRevoking(c)}>
                          Revoke<span className="sr-only"> claim code {c.id}</span>
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
          title="Revoke claim code?"
          confirmLabel="Revoke code"
          danger
          onClose={() => setRevoking(null)}
          onConfirm={async () => {
            await api.revokeClaimCode(revoking.id);
            setNotice(`Claim code ${revoking.id} revoked. It can no longer be redeemed.`);
            if (issued?.id === revoking.id) setIssued(null);
            codes.reload();
          }}
        >
          <p>
            Claim code <span className="mono">{revoking.id}</span>
            {revoking.sensorName ? ` for ${revoking.sensorName}` : ''} will stop working at once. A sensor that already redeemed it is not affected.
          </p>
        </ConfirmDialog>
      )}
    </section>
  );
}

function IssueClaimCode({ tenantId, onIssued }: { tenantId: string; onIssued: (c: IssuedClaimCode) => void }) {
  const { api } = useSession();
  const [sensorName, setSensorName] = useState('');
  const [ttl, setTtl] = useState(String(TTL_CHOICES[1].seconds));
  const form = useCreate(
    true,
    () => {
      const req: { ttlSeconds: number; sensorName?: string } = { ttlSeconds: Number(ttl) };
      if (sensorName.trim()) req.sensorName = sensorName.trim();
      return api.issueClaimCode(tenantId, req);
    },
    (c) => {
      onIssued(c);
      setSensorName('');
    },
  );

  return (
    <CreateForm titleId="issue-title" title="Issue a claim code" submitLabel="Issue claim code" busyLabel="Issuing…" state={form}>
      <div className="field">
        <label htmlFor="claim-sensor-name">Sensor name (optional)</label>
        <input id="claim-sensor-name" value={sensorName} onChange={(e) => setSensorName(e.target.value)} autoComplete="off" />
      </div>
      <div className="field">
        <label htmlFor="claim-ttl">Valid for</label>
        <select id="claim-ttl" value={ttl} onChange={(e) => setTtl(e.target.value)}>
          {TTL_CHOICES.map((c) => (
            <option key={c.seconds} value={c.seconds}>
              {c.label}
            </option>
          ))}
        </select>
      </div>
    </CreateForm>
  );
}

/** How to run the agent with this code: the code in a variable (not visible in the process list). */
export function agentCommand(apiBaseUrl: string, code: string): string {
  return `RXC_CLAIM_CODE='${code}' sensor-agent run --api ${apiBaseUrl} --state-dir /var/lib/rxc-sensor`;
}

function IssuedCode({ code, onDismiss }: { code: IssuedClaimCode; onDismiss: () => void }) {
  const { config } = useSession();
  return (
    <SecretOnce title="Claim code issued" value={code.code} testId="claim-code" warning="This code is shown only once. Copy it now and hand it to the sensor's installer." onDismiss={onDismiss}>
      <p>
        Expires <Time value={code.expiresAt} />. It enrols one sensor.
      </p>
      <h3 className="small-heading">On the sensor, run</h3>
      <CopyText value={agentCommand(config.apiBaseUrl, code.code)} testId="agent-command" className="command" label="Copy command" copiedText="Command copied to clipboard." />
      <p className="muted small">
        The agent redeems the code, enrols and keeps its state in <span className="mono">--state-dir</span>; later runs need no code. Use the address under which sensors reach the control plane if it
        differs from this console's.
      </p>
    </SecretOnce>
  );
}
