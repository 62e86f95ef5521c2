import { describe, expect, it } from 'vitest';
import { payloadChecks } from './checker.js';
import type { StreamGroup } from './checker.js';
import type { DeliveredEvent, Exchange } from './record.js';
import { meaningOf } from './util.js';

// The payload rules of the chaos checker, on their own: what counts as a
// silent repeat of a logging message on the GET stream.

const exchange = { n: 1 } as Exchange;
const group: StreamGroup = { key: 's/0', session: 's', stream: '0', exchanges: [exchange] };

/** Logging messages as the test upstream sends them: `[seq, call]` each. */
function delivered(messages: readonly [number, string | undefined][]): { id: string; event: DeliveredEvent; exchange: Exchange }[] {
  return messages.map(([seq, call], i) => {
    const data = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: call === undefined ? { seq } : { seq, call } } });
    return { id: `e-0-${i + 1}-${i + 1}`, event: { id: `e-0-${i + 1}-${i + 1}`, hasData: true, digest: String(i), meaning: meaningOf(data) }, exchange };
  });
}

function violations(messages: readonly [number, string | undefined][]): string[] {
  const found: string[] = [];
  payloadChecks(group, undefined, delivered(messages), (kind, _ex, _id, _expected, detail) => found.push(`${kind}: ${detail}`));
  return found;
}

describe('chaos checker: logging messages on the GET stream', () => {
  it('a message repeated within one call is a silent duplicate', () => {
    expect(violations([[1, '7'], [2, '7'], [3, '7'], [2, '7']])).toEqual(['payload_duplicate: logging message 2 after 3 of call 7']);
  });

  it('a new call first seen at any seq (the upstream dropped its start while no GET was open) is not', () => {
    expect(violations([[13, '7'], [14, '7'], [8, '9'], [9, '9']])).toEqual([]);
  });

  it('without call markers, only a restart at 1 counts as a new call', () => {
    expect(violations([[14, undefined], [8, undefined]])).toEqual(['payload_duplicate: logging message 8 after 14']);
    expect(violations([[14, undefined], [1, undefined]])).toEqual([]);
  });
});
