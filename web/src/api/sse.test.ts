import { describe, expect, it } from 'vitest';
import { readChatEvents, SseParser, toChatEvent } from './sse';

function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(enc.encode(ch));
      c.close();
    },
  });
}

describe('SseParser', () => {
  it('parses events split across arbitrary chunks', () => {
    const text = 'event: delta\ndata: {"text":"Hel"}\n\nevent: delta\ndata: {"text":"lo"}\n\n';
    for (let cut = 1; cut < text.length; cut++) {
      const p = new SseParser();
      const got = [...p.feed(text.slice(0, cut)), ...p.feed(text.slice(cut))];
      expect(got, `cut at ${cut}`).toEqual([
        { event: 'delta', data: '{"text":"Hel"}' },
        { event: 'delta', data: '{"text":"lo"}' },
      ]);
    }
  });

  it('handles CRLF, CR, comments, multi-line data, BOM and a missing space', () => {
    const p = new SseParser();
    const got = p.feed('\uFEFF: keep-alive\r\nevent:done\r\ndata: a\rdata:b\r\n\r\n');
    expect(got).toEqual([{ event: 'done', data: 'a\nb' }]);
  });

  it('does not split CRLF that arrives in two chunks', () => {
    const p = new SseParser();
    expect(p.feed('data: x\r')).toEqual([]);
    expect(p.feed('\n\r\n')).toEqual([{ event: 'message', data: 'x' }]);
  });

  it('drops an event without data and an unterminated last event', () => {
    const p = new SseParser();
    expect(p.feed('event: delta\n\ndata: {"text":"x"}\n')).toEqual([]);
    expect(p.end()).toEqual([]);
  });
});

describe('toChatEvent', () => {
  it.each([
    ['enrichment', '{"kind":"threatIntel","indicator":"1.2.3.4","title":"Known C2","detail":"MISP"}', { type: 'enrichment', kind: 'threatIntel', indicator: '1.2.3.4', title: 'Known C2', detail: 'MISP' }],
    ['delta', '{"text":"hi"}', { type: 'delta', text: 'hi' }],
    ['done', '{"model":"llama3"}', { type: 'done', model: 'llama3' }],
    ['error', '{"code":"upstream_timeout","message":"Model timed out"}', { type: 'error', code: 'upstream_timeout', message: 'Model timed out' }],
  ])('%s', (event, data, want) => {
    expect(toChatEvent({ event, data })).toEqual(want);
  });

  it.each([
    ['unknown event', 'message', '{"text":"x"}'],
    ['unknown enrichment kind', 'enrichment', '{"kind":"gossip","indicator":"x"}'],
    ['delta without text', 'delta', '{}'],
    ['bad json', 'delta', '{'],
  ])('ignores %s', (_n, event, data) => {
    expect(toChatEvent({ event, data })).toBeNull();
  });
});

describe('readChatEvents', () => {
  it('decodes UTF-8 split inside a character', async () => {
    const bytes = new TextEncoder().encode('event: delta\ndata: {"text":"Größe ✓"}\n\nevent: done\ndata: {"model":"m"}\n\n');
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < bytes.length; i += 3) c.enqueue(bytes.slice(i, i + 3));
        c.close();
      },
    });
    const got = [];
    for await (const ev of readChatEvents(stream)) got.push(ev);
    expect(got).toEqual([
      { type: 'delta', text: 'Größe ✓' },
      { type: 'done', model: 'm' },
    ]);
  });

  it('reads whole streams', async () => {
    const got = [];
    for await (const ev of readChatEvents(streamOf(['event: error\ndata: {"code":"x","message":"y"}\n\n']))) got.push(ev);
    expect(got).toEqual([{ type: 'error', code: 'x', message: 'y' }]);
  });
});
