// What the signed-in principal may do, as the control plane decides it (core/operators/access.go):
// admin everything, operators included; operator reads and operates (claim codes, commands,
// revocation) on the tenants granted; viewer only reads them. The console hides what the role does
// not allow; the API still checks every request and answers 403 forbidden or 404 otherwise.

import { ROLES } from '../api/types';
import type { Me, Role } from '../api/types';

export type Permission = 'view' | 'operate' | 'admin';

/** The role as sent, or viewer (the least) for anything the console does not know. */
export function roleOf(value: unknown): Role {
  return (ROLES as readonly unknown[]).includes(value) ? (value as Role) : 'viewer';
}

/** Normalises GET /api/auth/me: an unknown role is read as viewer, missing tenants as none. */
export function principalOf(me: Partial<Me> & { email: string }): Me {
  return {
    id: me.id ?? '',
    email: me.email,
    role: roleOf(me.role),
    tenants: Array.isArray(me.tenants) ? me.tenants.filter((t): t is string => typeof t === 'string') : [],
    ...(me.tokenId ? { tokenId: me.tokenId } : {}),
    ...(me.secondFactor === true ? { secondFactor: true } : {}),
    ...(me.secondFactorRequired === true ? { secondFactorRequired: true } : {}),
  };
}

/** Whether the tenant is visible at all. */
export function sees(me: Me, tenantId: string): boolean {
  return me.role === 'admin' || me.tenants.includes(tenantId);
}

/** Whether the principal holds perm on tenantId ('' for actions that concern no tenant). */
export function can(me: Me, perm: Permission, tenantId = ''): boolean {
  switch (perm) {
    case 'admin':
      return me.role === 'admin';
    case 'operate':
      return sees(me, tenantId) && (me.role === 'admin' || me.role === 'operator');
    case 'view':
      return sees(me, tenantId);
  }
}

const RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };

/** The roles the principal may hand on (to an API token): its own and those below it. */
export function grantableRoles(me: Me): Role[] {
  return ROLES.filter((r) => RANK[r] <= RANK[me.role]);
}
