// Runtime configuration: /config.js sets window.__APP_CONFIG__ before the bundle runs, so one
// image serves any control plane. Anything malformed is reported instead of guessed.

export interface AppConfig {
  /** Origin (and optional path prefix) of the control plane, without a trailing `/api` or `/`. */
  apiBaseUrl: string;
  analyticsAiChatEnabled: boolean;
}

export type ConfigResult = { ok: true; config: AppConfig } | { ok: false; error: string };

declare global {
  interface Window {
    __APP_CONFIG__?: unknown;
  }
}

export function normalizeBaseUrl(raw: string): string {
  const s = raw.trim();
  // Only the path may lose a trailing "/api": in "http://api" it is the host.
  const m = /^([a-z][a-z0-9+.-]*:\/\/[^/?#]*)(.*)$/i.exec(s);
  if (!m) return s.replace(/\/+$/, '');
  let path = m[2].replace(/\/+$/, '');
  if (path.endsWith('/api')) path = path.slice(0, -4);
  return m[1] + path.replace(/\/+$/, '');
}

export function readConfig(source: unknown = window.__APP_CONFIG__): ConfigResult {
  if (source === undefined || source === null) {
    return { ok: false, error: 'No runtime configuration: /config.js did not load or did not set window.__APP_CONFIG__.' };
  }
  if (typeof source !== 'object') {
    return { ok: false, error: 'Runtime configuration is not an object.' };
  }
  const raw = source as Record<string, unknown>;
  if (typeof raw.apiBaseUrl !== 'string' || raw.apiBaseUrl.trim() === '') {
    return { ok: false, error: 'Runtime configuration has no apiBaseUrl.' };
  }
  const apiBaseUrl = normalizeBaseUrl(raw.apiBaseUrl);
  let parsed: URL;
  try {
    parsed = new URL(apiBaseUrl);
  } catch {
    return { ok: false, error: `apiBaseUrl "${raw.apiBaseUrl}" is not a URL.` };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return { ok: false, error: `apiBaseUrl must be http or https, not ${parsed.protocol}` };
  }
  const flag = raw.analyticsAiChatEnabled;
  if (flag !== undefined && typeof flag !== 'boolean') {
    return { ok: false, error: 'analyticsAiChatEnabled must be true or false.' };
  }
  return { ok: true, config: { apiBaseUrl, analyticsAiChatEnabled: flag === true } };
}
