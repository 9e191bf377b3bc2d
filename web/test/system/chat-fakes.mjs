// A fake model server and a fake MISP for the real-system browser run of the analytics chat. They
// speak the real wire formats the control plane's adapters use (see adapters/openai/openaitest and
// adapters/misp/misptest for the Go counterparts):
//   OpenAI-compatible: GET /v1/models; POST /v1/chat/completions with "stream": true, answered as
//     server-sent events `data: {"choices":[{"delta":{"content":…}}]}` … `data: [DONE]`;
//     Authorization: Bearer <key>.
//   MISP: POST /attributes/restSearch {value, returnFormat: "json", limit} with Authorization: <key>
//     and Accept: application/json, answered {"response": {"Attribute": [...]}}.
// MISP knows KNOWN_INDICATOR only. The model's answer depends on what the control plane told it:
// a threat-intel line in the system prompt names the indicator, so the answer shows the lookup
// reached the model too. with-rxc-dev.mjs starts both before bin/rxc-dev and points the
// ANALYTICS_CHAT_* variables at them; chat-real.test.ts asserts what the console shows.

import { randomBytes } from 'node:crypto';
import http from 'node:http';

export const CHAT_MODEL = 'rxc-e2e-model';
// Public addresses, as private and documentation ranges are never looked up (the Go tests use the
// same two): nmap's public scan-test host is the hit, example.com's former address the miss.
export const KNOWN_INDICATOR = '45.33.32.156';
export const KNOWN_EVENT = 'Mass scanning campaign';
export const UNKNOWN_INDICATOR = '93.184.216.34';

/** What the fake model answers: about the indicator threat intelligence matched, if any. */
export function modelAnswer(matched) {
  return matched ? `Threat intelligence lists ${matched} in a scanning campaign; block it at the edge.` : 'No threat intelligence matched these addresses; keep watching.';
}

const MAX_BODY = 1 << 20;

async function readJson(req) {
  let raw = '';
  for await (const chunk of req) {
    raw += chunk;
    if (raw.length > MAX_BODY) return undefined;
  }
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

function sendJson(res, status, value) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(value));
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`));
  });
}

function close(server) {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function modelServer(key) {
  return http.createServer(async (req, res) => {
    if (req.headers.authorization !== `Bearer ${key}`) {
      // Unlike OpenAI, never echo the key that was refused.
      return sendJson(res, 401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } });
    }
    if (req.method === 'GET' && req.url === '/v1/models') {
      return sendJson(res, 200, { object: 'list', data: [{ id: CHAT_MODEL, object: 'model', owned_by: 'rxc-e2e' }] });
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return sendJson(res, 404, { error: { message: 'not found' } });
    const body = await readJson(req);
    if (!body || body.stream !== true || !Array.isArray(body.messages)) return sendJson(res, 400, { error: { message: 'a streamed chat request is expected' } });
    if (body.model !== CHAT_MODEL) return sendJson(res, 404, { error: { message: `model ${body.model} not found` } });
    const system = body.messages.find((m) => m.role === 'system')?.content ?? '';
    const matched = /Threat intelligence: (\S+) appears in/.exec(system)?.[1] ?? null;
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    const chunk = (delta, finish = null) =>
      res.write(`data: ${JSON.stringify({ id: 'chatcmpl-e2e', object: 'chat.completion.chunk', model: CHAT_MODEL, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
    chunk({ role: 'assistant', content: '' });
    // Word by word, a little apart, as a model streams.
    for (const word of modelAnswer(matched).split(/(?<= )/)) {
      if (res.destroyed) return;
      chunk({ content: word });
      await new Promise((r) => setTimeout(r, 15));
    }
    chunk({}, 'stop');
    res.end('data: [DONE]\n\n');
  });
}

function mispServer(key) {
  return http.createServer(async (req, res) => {
    if (req.method !== 'POST' || req.url !== '/attributes/restSearch') return sendJson(res, 404, { name: 'Not Found', message: 'Not Found', url: req.url });
    if (req.headers.authorization !== key) {
      return sendJson(res, 403, { name: 'Authentication failed.', message: 'Authentication failed.', url: req.url });
    }
    if (req.headers.accept !== 'application/json') return sendJson(res, 406, { name: 'Not acceptable', message: 'Accept must be application/json', url: req.url });
    const q = await readJson(req);
    if (!q || q.returnFormat !== 'json' || typeof q.value !== 'string' || !(q.limit >= 1)) return sendJson(res, 400, { name: 'Bad search', message: 'Bad search', url: req.url });
    const Attribute =
      q.value === KNOWN_INDICATOR
        ? [{ id: '1', event_id: '4711', value: KNOWN_INDICATOR, type: 'ip-src', category: 'Network activity', to_ids: true, Event: { id: '4711', info: KNOWN_EVENT, org_id: '1', distribution: '1' } }]
        : [];
    sendJson(res, 200, { response: { Attribute } });
  });
}

/**
 * Starts both fakes on free loopback ports. env holds the ANALYTICS_CHAT_* variables for the
 * control plane (with fresh keys: never print it).
 */
export async function startChatFakes() {
  const modelKey = randomBytes(18).toString('base64url');
  const mispKey = randomBytes(18).toString('base64url');
  const model = modelServer(modelKey);
  const misp = mispServer(mispKey);
  const [modelUrl, mispUrl] = await Promise.all([listen(model), listen(misp)]);
  return {
    env: {
      ANALYTICS_CHAT_ENABLED: 'true',
      ANALYTICS_CHAT_BASE_URL: `${modelUrl}/v1`,
      ANALYTICS_CHAT_MODEL: CHAT_MODEL,
      ANALYTICS_CHAT_API_KEY: modelKey,
      ANALYTICS_CHAT_TIMEOUT: '20s',
      ANALYTICS_CHAT_ENRICHMENT_ENABLED: 'true',
      ANALYTICS_CHAT_ENRICHMENT_MISP_URL: mispUrl,
      ANALYTICS_CHAT_ENRICHMENT_MISP_KEY: mispKey,
      ANALYTICS_CHAT_ENRICHMENT_TIMEOUT: '3s',
    },
    stop: () => Promise.all([close(model), close(misp)]),
  };
}
