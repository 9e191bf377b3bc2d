// A text/event-stream parser (WHATWG HTML "server-sent events" rules) fed with arbitrary
// chunks, plus the typed events of the analytics chat contract.

export interface RawEvent {
  event: string;
  data: string;
  id?: string;
}

export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private id: string | undefined;
  private sawBom = false;

  /** Feeds decoded text; returns the events completed by it. */
  feed(chunk: string): RawEvent[] {
    if (!this.sawBom) {
      if (chunk.length === 0) return [];
      if (chunk.charCodeAt(0) === 0xfeff) chunk = chunk.slice(1);
      this.sawBom = true;
    }
    this.buffer += chunk;
    const out: RawEvent[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      if (!m) break;
      // A lone CR at the very end may be the first half of CRLF: wait for more input.
      if (m[0] === '\r' && m.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    return out;
  }

  /** Ends the stream; an event without its closing blank line is dropped, as the standard says. */
  end(): RawEvent[] {
    this.buffer = '';
    this.data = [];
    this.event = '';
    return [];
  }

  private line(line: string): RawEvent | null {
    if (line === '') {
      if (this.data.length === 0) {
        this.event = '';
        return null;
      }
      const ev: RawEvent = { event: this.event || 'message', data: this.data.join('\n') };
      if (this.id !== undefined) ev.id = this.id;
      this.data = [];
      this.event = '';
      return ev;
    }
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.event = value;
        break;
      case 'data':
        this.data.push(value);
        break;
      case 'id':
        if (!value.includes('\0')) this.id = value;
        break;
      default:
        break;
    }
    return null;
  }
}

export type EnrichmentKind = 'threatIntel' | 'historical' | 'playbook';

export type ChatEvent =
  | { type: 'enrichment'; kind: EnrichmentKind; indicator: string; title: string; detail: string }
  | { type: 'delta'; text: string }
  | { type: 'done'; model: string }
  | { type: 'error'; code: string; message: string };

const KINDS: readonly string[] = ['threatIntel', 'historical', 'playbook'];

/** Turns a raw event into a chat event; unknown or malformed events yield null and are ignored. */
export function toChatEvent(raw: RawEvent): ChatEvent | null {
  let body: unknown;
  try {
    body = JSON.parse(raw.data);
  } catch {
    return raw.event === 'error' ? { type: 'error', code: 'malformed', message: raw.data } : null;
  }
  if (!body || typeof body !== 'object') return null;
  const b = body as Record<string, unknown>;
  const s = (v: unknown) => (typeof v === 'string' ? v : '');
  switch (raw.event) {
    case 'enrichment':
      if (!KINDS.includes(s(b.kind))) return null;
      return { type: 'enrichment', kind: b.kind as EnrichmentKind, indicator: s(b.indicator), title: s(b.title), detail: s(b.detail) };
    case 'delta':
      return typeof b.text === 'string' ? { type: 'delta', text: b.text } : null;
    case 'done':
      return { type: 'done', model: s(b.model) };
    case 'error':
      return { type: 'error', code: s(b.code) || 'error', message: s(b.message) || 'The assistant failed.' };
    default:
      return null;
  }
}

/** Reads a fetch Response body as a stream of chat events. */
export async function* readChatEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ChatEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      const text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (const raw of parser.feed(text)) {
        const ev = toChatEvent(raw);
        if (ev) yield ev;
      }
      if (done) break;
    }
  } finally {
    reader.releaseLock();
  }
}
