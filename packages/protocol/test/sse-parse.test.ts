import { describe, it, expect } from 'vitest';
import { isSseLimitError, SseLimitError, SseParser, type SseMessage } from '@tether/protocol';

function parse(...chunks: Array<string | Uint8Array>): SseMessage[] {
  const p = new SseParser();
  const out = chunks.flatMap((c) => p.push(c));
  return [...out, ...p.end()];
}

function msg(fields: Partial<SseMessage>): SseMessage {
  return { id: undefined, lastEventId: '', event: undefined, data: '', hasData: false, retryMs: undefined, ...fields };
}

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);

describe('SseParser: lines', () => {
  it.each([
    ['LF', 'data: a\ndata: b\n\n'],
    ['CR', 'data: a\rdata: b\r\r'],
    ['CRLF', 'data: a\r\ndata: b\r\n\r\n'],
    ['mixed', 'data: a\rdata: b\r\n\n'],
  ])('accepts %s line endings', (_, text) => {
    expect(parse(text)).toEqual([msg({ data: 'a\nb', hasData: true })]);
  });

  it('treats LF CR as two line endings (a blank line)', () => {
    expect(parse('data: a\n\rdata: b\n\n')).toEqual([msg({ data: 'a', hasData: true }), msg({ data: 'b', hasData: true })]);
  });

  it('treats a CR at the end of a chunk and an LF at the start of the next as one line ending', () => {
    expect(parse('data: a\r', '\ndata: b\r', '\n\r', '\n')).toEqual([msg({ data: 'a\nb', hasData: true })]);
    // The same split with bytes, and with an empty chunk in between.
    expect(parse(bytes('data: a\r'), new Uint8Array(0), bytes('\n\r'), bytes('\n'))).toEqual([
      msg({ data: 'a', hasData: true }),
    ]);
  });

  it('dispatches on a CR at the end of a chunk without waiting for the next chunk', () => {
    const p = new SseParser();
    expect(p.push('data: x\r\r')).toEqual([msg({ data: 'x', hasData: true })]);
    // The LF that follows completes the CRLF; it must not count as another line.
    expect(p.push('\ndata: y\n\n')).toEqual([msg({ data: 'y', hasData: true })]);
  });

  it('strips one leading BOM, from bytes or text, even when split', () => {
    expect(parse('\uFEFFdata: a\n\n')).toEqual([msg({ data: 'a', hasData: true })]);
    expect(parse(new Uint8Array([0xef, 0xbb]), new Uint8Array([0xbf]), bytes('data: a\n\n'))).toEqual([
      msg({ data: 'a', hasData: true }),
    ]);
    // A second BOM is text: here it makes the field name unknown.
    expect(parse('\uFEFF\uFEFFdata: a\n\n')).toEqual([]);
    // A BOM later in the stream is not stripped.
    expect(parse('data: a\n\n', '\uFEFFdata: b\n\n')).toEqual([msg({ data: 'a', hasData: true })]);
  });

  it('decodes UTF-8 split inside a multibyte character', () => {
    const b = bytes('data: é😀\n\n');
    const chunks = Array.from(b, (x) => new Uint8Array([x]));
    expect(parse(...chunks)).toEqual([msg({ data: 'é😀', hasData: true })]);
  });

  it('replaces invalid UTF-8 with U+FFFD', () => {
    expect(parse(new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0xff, 0x0a, 0x0a]))).toEqual([
      msg({ data: '\uFFFD', hasData: true }),
    ]);
  });
});

describe('SseParser: fields', () => {
  it('joins data lines with LF and removes the final LF', () => {
    expect(parse('data\ndata:\ndata: x\n\n')).toEqual([msg({ data: '\n\nx', hasData: true })]);
    expect(parse('data:\n\n')).toEqual([msg({ data: '', hasData: true })]);
  });

  it('strips exactly one leading space from the value', () => {
    expect(parse('data:  two\ndata:none\n\n')).toEqual([msg({ data: ' two\nnone', hasData: true })]);
  });

  it('splits on the first colon only', () => {
    expect(parse('data: a: b:c\nevent:x:y\n\n')).toEqual([msg({ data: 'a: b:c', event: 'x:y', hasData: true })]);
  });

  it('treats a line without a colon as a field with an empty value', () => {
    expect(parse('data\n\n')).toEqual([msg({ data: '', hasData: true })]);
    expect(parse('event\ndata: x\n\n')).toEqual([msg({ event: '', data: 'x', hasData: true })]);
    expect(parse('id\n\n')).toEqual([msg({ id: '', lastEventId: '' })]);
  });

  it('ignores comments, also inside a block', () => {
    expect(parse(': hello\n\n')).toEqual([]);
    expect(parse(':\ndata: a\n: data: b\ndata: c\n\n')).toEqual([msg({ data: 'a\nc', hasData: true })]);
  });

  it('ignores unknown fields, and field names are case-sensitive', () => {
    expect(parse('foo: bar\nData: x\n ID: y\n\n')).toEqual([]);
    expect(parse('foo: bar\ndata: x\n\n')).toEqual([msg({ data: 'x', hasData: true })]);
  });

  it('keeps the last event field of a block, and does not carry it to the next', () => {
    expect(parse('event: a\nevent: b\ndata: 1\n\ndata: 2\n\n')).toEqual([
      msg({ event: 'b', data: '1', hasData: true }),
      msg({ data: '2', hasData: true }),
    ]);
  });

  it('tracks the last event id across blocks, and an empty id resets it', () => {
    expect(parse('id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n')).toEqual([
      msg({ id: '1', lastEventId: '1', data: 'a', hasData: true }),
      msg({ lastEventId: '1', data: 'b', hasData: true }),
      msg({ id: '', lastEventId: '', data: 'c', hasData: true }),
    ]);
  });

  it('ignores an id containing NULL', () => {
    expect(parse('id: 1\n\nid: 2\0x\ndata: a\n\n')).toEqual([
      msg({ id: '1', lastEventId: '1' }),
      msg({ lastEventId: '1', data: 'a', hasData: true }),
    ]);
  });

  it('keeps NUL in data and event', () => {
    expect(parse('event: \0\ndata: a\0b\n\n')).toEqual([msg({ event: '\0', data: 'a\0b', hasData: true })]);
  });

  it('accepts retry only when it is all ASCII digits', () => {
    const p = new SseParser();
    expect(p.push('retry: 1500\n\n')).toEqual([msg({ retryMs: 1500 })]);
    expect(p.retryMs).toBe(1500);
    for (const bad of ['retry: 1.5', 'retry: -1', 'retry: +1', 'retry: 1e3', 'retry: 12 ', 'retry:  12', 'retry:', 'retry: ١']) {
      expect(p.push(`${bad}\n\n`)).toEqual([]);
    }
    expect(p.retryMs).toBe(1500);
    expect(p.push('retry: 0\n\n')).toEqual([msg({ retryMs: 0 })]);
    // Past 2^53 the value cannot be held exactly, so it is ignored.
    expect(p.push('retry: 99999999999999999999\n\n')).toEqual([]);
    expect(p.retryMs).toBe(0);
  });

  it('reports id-only priming events (WHATWG would not dispatch them)', () => {
    expect(parse('id: e-0-1-1\nretry: 3000\n\n')).toEqual([msg({ id: 'e-0-1-1', lastEventId: 'e-0-1-1', retryMs: 3000 })]);
    expect(parse('id: e-0-1-1\ndata:\n\n')).toEqual([msg({ id: 'e-0-1-1', lastEventId: 'e-0-1-1', hasData: true })]);
  });

  it('reports nothing for blank lines alone or blocks of ignored fields', () => {
    expect(parse('\n\n\r\n\r')).toEqual([]);
    expect(parse('foo\nid: \0\nretry: x\n\n')).toEqual([]);
  });
});

describe('SseParser: end of stream', () => {
  it('discards an unterminated block, and its id', () => {
    const p = new SseParser();
    expect(p.push('id: 1\ndata: a\n\nid: 2\ndata: b\n')).toEqual([msg({ id: '1', lastEventId: '1', data: 'a', hasData: true })]);
    expect(p.end()).toEqual([]);
    expect(p.lastEventId).toBe('1');
    // Read the next response with the same parser: the discarded id 2 must
    // not reappear, and a new leading BOM is stripped again.
    expect(p.push('\uFEFFdata: c\n\n')).toEqual([msg({ lastEventId: '1', data: 'c', hasData: true })]);
  });

  it('discards an unterminated line and a dangling partial UTF-8 sequence', () => {
    const p = new SseParser();
    expect(p.push(new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0xc3]))).toEqual([]);
    expect(p.end()).toEqual([]);
    expect(p.push('data: ok\n\n')).toEqual([msg({ data: 'ok', hasData: true })]);
  });

  it('lastEventId changes only at a blank line', () => {
    const p = new SseParser();
    p.push('id: 7\n');
    expect(p.lastEventId).toBe('');
    p.push('\n');
    expect(p.lastEventId).toBe('7');
  });
});

describe('SseParser: limits', () => {
  it('throws sse_line_too_long for a line over maxLineBytes, even before it ends', () => {
    const p = new SseParser({ maxLineBytes: 16 });
    expect(p.push('data: 0123456789\n\n')).toHaveLength(1); // 16 bytes: at the limit
    let caught: unknown;
    try {
      p.push('data: 01234567890');
    } catch (err) {
      caught = err;
    }
    expect(isSseLimitError(caught)).toBe(true);
    expect(caught).toMatchObject({ code: 'sse_line_too_long', limitBytes: 16 });
    // The parser stays failed.
    expect(() => p.push('\n\n')).toThrow(SseLimitError);
    expect(() => p.end()).toThrow(SseLimitError);
  });

  it('counts UTF-8 bytes, not UTF-16 code units', () => {
    const p = new SseParser({ maxLineBytes: 10 });
    expect(() => p.push('data:éééé')).toThrow(expect.objectContaining({ code: 'sse_line_too_long' }));
    expect(new SseParser({ maxLineBytes: 10 }).push('data:éé\n\n')).toHaveLength(1);
  });

  it('throws sse_event_too_large for a block over maxBlockBytes, comments excluded', () => {
    const p = new SseParser({ maxBlockBytes: 20 });
    expect(p.push(': a long comment line that does not count\ndata: 123456789012\n\n')).toHaveLength(1);
    expect(() => p.push('data: 1234567\ndata: 1234567\n')).toThrow(
      expect.objectContaining({ code: 'sse_event_too_large', limitBytes: 20 }),
    );
  });

  it('hands over the messages completed before the limit in the same push', () => {
    const p = new SseParser({ maxLineBytes: 8 });
    try {
      p.push('data: a\n\ndata: b\n\ndata: 123456789\n');
      expect.unreachable();
    } catch (err) {
      if (!(err instanceof SseLimitError)) throw err;
      expect(err.messages.map((m) => m.data)).toEqual(['a', 'b']);
    }
  });

  it('rejects invalid limits', () => {
    expect(() => new SseParser({ maxLineBytes: 0 })).toThrow(TypeError);
    expect(() => new SseParser({ maxBlockBytes: 1.5 })).toThrow(TypeError);
  });
});
