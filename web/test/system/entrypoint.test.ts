// The entrypoint hook under both shells the image and Debian have: busybox sh (Alpine's /bin/sh)
// and dash. Good values must produce a config.js that evaluates to exactly the expected object;
// hostile values must stop the container (non-zero exit, message on stderr, nothing written).

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { runHook, tempDir } from './tools';

const SHELLS = ['busybox', 'dash'] as const;

function run(shell: (typeof SHELLS)[number], env: Record<string, string | undefined>, ipv6 = false) {
  const dir = tempDir('hook');
  const out = path.join(dir, 'out');
  const inet6 = path.join(dir, 'if_inet6');
  writeFileSync(inet6, ipv6 ? '00000000000000000000000000000001 01 80 10 80       lo\n' : '');
  const r = runHook(shell, { RXC_CONFIG_DIR: out, RXC_IF_INET6: inet6, ...env });
  const read = (name: string) => readFileSync(path.join(out, name), 'utf8');
  return { ...r, out, read, exists: (name: string) => existsSync(path.join(out, name)) };
}

/** Evaluates config.js the way a browser would and returns what it defined. */
function evaluate(source: string) {
  const window: Record<string, unknown> = {};
  const context = vm.createContext({ window });
  vm.runInContext(source, context, { timeout: 1000 });
  const globals = Object.keys(vm.runInContext('globalThis', context)).filter((k) => k !== 'window');
  return { config: window.__APP_CONFIG__, keys: Object.keys(window), globals };
}

const GOOD: [string, Record<string, string | undefined>, { apiBaseUrl: string; analyticsAiChatEnabled: boolean }, string][] = [
  ['defaults', {}, { apiBaseUrl: 'http://localhost:5009', analyticsAiChatEnabled: false }, 'http://localhost:5009'],
  ['trailing /api', { VITE_API_BASE_URL: 'https://cp.example.com/api' }, { apiBaseUrl: 'https://cp.example.com', analyticsAiChatEnabled: false }, 'https://cp.example.com'],
  ['trailing /api/', { VITE_API_BASE_URL: 'https://cp.example.com/api/' }, { apiBaseUrl: 'https://cp.example.com', analyticsAiChatEnabled: false }, 'https://cp.example.com'],
  ['trailing /', { VITE_API_BASE_URL: 'http://10.0.0.5:5009/' }, { apiBaseUrl: 'http://10.0.0.5:5009', analyticsAiChatEnabled: false }, 'http://10.0.0.5:5009'],
  ['path prefix', { VITE_API_BASE_URL: 'https://example.org/rxc/api' }, { apiBaseUrl: 'https://example.org/rxc', analyticsAiChatEnabled: false }, 'https://example.org'],
  ['host named api', { VITE_API_BASE_URL: 'http://api' }, { apiBaseUrl: 'http://api', analyticsAiChatEnabled: false }, 'http://api'],
  ['IPv6 literal', { VITE_API_BASE_URL: 'http://[::1]:5009/api' }, { apiBaseUrl: 'http://[::1]:5009', analyticsAiChatEnabled: false }, 'http://[::1]:5009'],
  ['chat on', { VITE_API_BASE_URL: 'https://cp.example.com', VITE_ANALYTICS_AI_CHAT_ENABLED: 'true' }, { apiBaseUrl: 'https://cp.example.com', analyticsAiChatEnabled: true }, 'https://cp.example.com'],
  ['chat off', { VITE_ANALYTICS_AI_CHAT_ENABLED: 'false' }, { apiBaseUrl: 'http://localhost:5009', analyticsAiChatEnabled: false }, 'http://localhost:5009'],
];

const HOSTILE: [string, Record<string, string>][] = [
  ['newline', { VITE_API_BASE_URL: 'http://a.example\nalert(1)//' }],
  ['trailing newline', { VITE_API_BASE_URL: 'http://a.example/\n' }],
  ['double quote', { VITE_API_BASE_URL: 'http://a.example/"};alert(1);//' }],
  ['single quote', { VITE_API_BASE_URL: "http://a.example/'" }],
  ['closing script tag', { VITE_API_BASE_URL: 'http://a.example/</script><script>alert(1)</script>' }],
  ['backslash', { VITE_API_BASE_URL: 'http://a.example/\\u0022' }],
  ['space', { VITE_API_BASE_URL: 'http://a.example/ x' }],
  ['tab', { VITE_API_BASE_URL: 'http://a.example/\tx' }],
  ['control character', { VITE_API_BASE_URL: 'http://a.example/\u0001' }],
  ['angle bracket', { VITE_API_BASE_URL: 'http://a<b.example' }],
  ['javascript: URL', { VITE_API_BASE_URL: 'javascript:alert(1)' }],
  ['JavaScript: URL', { VITE_API_BASE_URL: 'JavaScript://a.example/%0aalert(1)' }],
  ['ftp: URL', { VITE_API_BASE_URL: 'ftp://files.example.com/api' }],
  ['data: URL', { VITE_API_BASE_URL: 'data:text/javascript,alert(1)' }],
  ['no scheme', { VITE_API_BASE_URL: 'localhost:5009' }],
  ['empty', { VITE_API_BASE_URL: '' }],
  ['no host', { VITE_API_BASE_URL: 'http:///api' }],
  ['user info', { VITE_API_BASE_URL: 'http://user:pw@a.example' }],
  ['query', { VITE_API_BASE_URL: 'http://a.example/?x=1' }],
  ['fragment', { VITE_API_BASE_URL: 'http://a.example/#x' }],
  ['non-ASCII host', { VITE_API_BASE_URL: 'http://exämple.com' }],
  ['semicolon (nginx injection)', { VITE_API_BASE_URL: 'http://a.example;}' }],
  ['dollar (nginx variable)', { VITE_API_BASE_URL: 'http://$host' }],
  ['port out of range', { VITE_API_BASE_URL: 'http://a.example:70000' }],
  ['empty port', { VITE_API_BASE_URL: 'http://a.example:/api' }],
  ['bad IPv6', { VITE_API_BASE_URL: 'http://[::1"]/' }],
  ['chat flag yes', { VITE_ANALYTICS_AI_CHAT_ENABLED: 'yes' }],
  ['chat flag TRUE', { VITE_ANALYTICS_AI_CHAT_ENABLED: 'TRUE' }],
  ['chat flag empty', { VITE_ANALYTICS_AI_CHAT_ENABLED: '' }],
  ['chat flag injection', { VITE_ANALYTICS_AI_CHAT_ENABLED: 'true,"x":1' }],
];

for (const shell of SHELLS) {
  describe(`40-rxc-config.sh under ${shell}`, () => {
    it.each(GOOD)('%s', (_name, env, want, origin) => {
      const r = run(shell, env);
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      const source = r.read('config.js');
      expect(source.split('\n').filter(Boolean)).toHaveLength(1);
      const got = evaluate(source);
      expect(got.config).toEqual(want);
      expect(got.keys).toEqual(['__APP_CONFIG__']);
      expect(got.globals).toEqual([]);
      expect(r.read('api-origin.conf')).toBe(`map $host $rxc_api_origin {\n    default "${origin}";\n}\n`);
    });

    it.each(HOSTILE)('refuses %s', (_name, env) => {
      const r = run(shell, env);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/^40-rxc-config: .*(VITE_API_BASE_URL|VITE_ANALYTICS_AI_CHAT_ENABLED)/);
      expect(r.exists('config.js')).toBe(false);
      expect(r.exists('api-origin.conf')).toBe(false);
    });

    it('listens on IPv6 only where the host has it', () => {
      expect(run(shell, {}, true).read('listen.conf')).toBe('listen 8000;\nlisten [::]:8000;\n');
      expect(run(shell, {}, false).read('listen.conf')).toBe('listen 8000;\n');
      expect(run(shell, { RXC_IF_INET6: '/nonexistent/if_inet6' }).read('listen.conf')).toBe('listen 8000;\n');
      expect(run(shell, { RXC_LISTEN_PORT: '18080' }, true).read('listen.conf')).toBe('listen 18080;\nlisten [::]:18080;\n');
    });

    it('refuses a bad listen port and an unwritable folder', () => {
      expect(run(shell, { RXC_LISTEN_PORT: '80;x' }).status).not.toBe(0);
      const r = run(shell, { RXC_CONFIG_DIR: '/proc/rxc-not-writable' });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/writable/);
    });

    it('replaces an earlier config', () => {
      const dir = tempDir('hook-replace');
      writeFileSync(path.join(dir, 'config.js'), 'window.__APP_CONFIG__ = {"stale":true};\n');
      const r = runHook(shell, { RXC_CONFIG_DIR: dir, VITE_API_BASE_URL: 'https://new.example' });
      expect(r.status).toBe(0);
      expect(evaluate(readFileSync(path.join(dir, 'config.js'), 'utf8')).config).toEqual({ apiBaseUrl: 'https://new.example', analyticsAiChatEnabled: false });
    });
  });
}
