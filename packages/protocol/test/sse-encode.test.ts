import { describe, it, expect } from 'vitest';
import { encodeSseComment, encodeSseEvent } from '@tether/protocol';

describe('encodeSseEvent', () => {
  it('writes each field on its own line and ends with a blank line', () => {
    expect(encodeSseEvent({ id: 'a-0-1-1', event: 'message', data: '{"x":1}', retryMs: 3000 })).toBe(
      'id: a-0-1-1\nevent: message\nretry: 3000\ndata: {"x":1}\n\n',
    );
  });

  it('writes only the fields given', () => {
    expect(encodeSseEvent({ data: 'hi' })).toBe('data: hi\n\n');
    expect(encodeSseEvent({ id: 'x' })).toBe('id: x\n\n');
    expect(encodeSseEvent({ retryMs: 0 })).toBe('retry: 0\n\n');
  });

  it('writes a priming event: an id and empty data', () => {
    expect(encodeSseEvent({ id: 'e-0-1-1', data: '' })).toBe('id: e-0-1-1\ndata:\n\n');
  });

  it('writes an empty id, which resets the client cursor', () => {
    expect(encodeSseEvent({ id: '', data: 'x' })).toBe('id:\ndata: x\n\n');
  });

  it('splits multi-line data on CRLF, CR and LF, one data line per line', () => {
    expect(encodeSseEvent({ data: 'a\nb\r\nc\rd' })).toBe('data: a\ndata: b\ndata: c\ndata: d\n\n');
    expect(encodeSseEvent({ data: '\n' })).toBe('data:\ndata:\n\n');
    expect(encodeSseEvent({ data: 'a\n\nb' })).toBe('data: a\ndata:\ndata: b\n\n');
    // A CR LF pair is one break, LF CR is two.
    expect(encodeSseEvent({ data: 'a\n\rb' })).toBe('data: a\ndata:\ndata: b\n\n');
  });

  it('keeps a value that starts with a space, since the parser strips only one', () => {
    expect(encodeSseEvent({ data: ' x', event: ' e' })).toBe('event:  e\ndata:  x\n\n');
  });

  it('passes colons and NUL in data through', () => {
    expect(encodeSseEvent({ data: 'a: b\0c' })).toBe('data: a: b\0c\n\n');
  });

  it.each([
    ['id with LF', { id: 'a\nb' }],
    ['id with CR', { id: 'a\rb' }],
    ['id with NUL', { id: 'a\0b' }],
    ['event with LF', { event: 'a\nevent: evil' }],
    ['event with CR', { event: 'a\r' }],
    ['event with NUL', { event: '\0' }],
    ['negative retry', { retryMs: -1 }],
    ['fractional retry', { retryMs: 1.5 }],
    ['NaN retry', { retryMs: Number.NaN }],
    ['infinite retry', { retryMs: Number.POSITIVE_INFINITY }],
    ['no fields', {}],
  ])('throws TypeError for %s', (_, e) => {
    expect(() => encodeSseEvent(e)).toThrow(TypeError);
  });
});

describe('encodeSseComment', () => {
  it('writes a heartbeat comment followed by a blank line', () => {
    expect(encodeSseComment('hb')).toBe(': hb\n\n');
    expect(encodeSseComment('')).toBe(':\n\n');
  });

  it('prefixes every line, so no text can inject a field', () => {
    expect(encodeSseComment('a\ndata: evil\r\nb\rc')).toBe(': a\n: data: evil\n: b\n: c\n\n');
    expect(encodeSseComment('x\n')).toBe(': x\n:\n\n');
  });
});
