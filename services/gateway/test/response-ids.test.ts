import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
// Internal module (not the package's entry): how the pump knows which requests a stream has answered.
import { responseIds } from '../src/streams/pump.js';

/** What responseIds answered before it skipped payloads that hold no response: parse everything. */
function parsed(data: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return [];
  }
  return (Array.isArray(value) ? value : [value])
    .filter((m): m is { id: unknown } => typeof m === 'object' && m !== null && 'id' in m && ('result' in m || 'error' in m) && !('method' in m))
    .map((m) => JSON.stringify(m.id));
}

describe('responseIds (the ids of the responses a payload carries)', () => {
  it('notifications are not parsed, responses and errors are, escaped keys too', () => {
    expect(responseIds('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}')).toEqual([]);
    expect(responseIds('{"jsonrpc":"2.0","id":3,"result":{"content":[]}}')).toEqual(['3']);
    expect(responseIds('{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}')).toEqual(['"x"']);
    // JSON lets a key be spelled with escapes: still a response.
    expect(responseIds('{"jsonrpc":"2.0","id":4,"\\u0072esult":{}}')).toEqual(['4']);
    expect(responseIds('[{"jsonrpc":"2.0","id":5,"result":{}},{"jsonrpc":"2.0","method":"x"}]')).toEqual(['5']);
  });

  it('answers what parsing every payload answers, for any JSON-RPC-like payload', () => {
    const key = fc.constantFrom('id', 'result', 'error', 'method', 'params', 'jsonrpc', '\u0072esult', 'r\u00e9sult');
    const message = fc.dictionary(key, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 });
    const payload = fc.oneof(message, fc.array(message, { maxLength: 3 })).map((v) => JSON.stringify(v));
    const escaped = payload.map((text) => text.replace(/"(result|error)"/g, (_m, k: string) => `"\\u00${k.charCodeAt(0).toString(16)}${k.slice(1)}"`));
    fc.assert(
      fc.property(fc.oneof(payload, escaped, fc.string()), (data) => {
        expect(responseIds(data)).toEqual(parsed(data));
      }),
      { numRuns: 2_000 },
    );
  });
});
