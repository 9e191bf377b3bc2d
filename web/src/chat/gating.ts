// The analytics chat is shown only when both sides agree: the image's flag and the control plane.

import type { ApiClient } from '../api/client';
import type { ChatStatus } from '../api/types';
import type { EnrichmentKind } from '../api/sse';

export interface ChatAvailability {
  available: boolean;
  status?: ChatStatus;
}

export async function chatAvailability(flag: boolean, api: Pick<ApiClient, 'chatStatus'>): Promise<ChatAvailability> {
  if (!flag) return { available: false };
  try {
    const status = await api.chatStatus();
    return status && status.enabled === true ? { available: true, status } : { available: false };
  } catch {
    return { available: false };
  }
}

const CAPABILITY: Record<EnrichmentKind, 'threatIntel' | 'historicalEnrichment' | 'playbooks'> = {
  threatIntel: 'threatIntel',
  historical: 'historicalEnrichment',
  playbook: 'playbooks',
};

/** An enrichment chip is shown only when the control plane announced the matching capability. */
export function showsEnrichment(status: ChatStatus | undefined, kind: EnrichmentKind): boolean {
  return status?.capabilities?.[CAPABILITY[kind]] === true;
}
