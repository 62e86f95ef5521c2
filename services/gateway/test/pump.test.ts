import { describe, expect, it } from 'vitest';
// Internal module (not the package's entry): the pump's body reader.
import { responseIds, untilAborted } from '../src/streams/pump.js';

/** A body that yields `first` and then waits forever, noting when it is stopped. */
function stalledBody(first: string[]): { body: AsyncIterable<string>; returned: () => boolean } {
  let returned = false;
  const body: AsyncIterable<string> = {
    [Symbol.asyncIterator]() {
      let i = 0;
      return {
        next: () => (i < first.length ? Promise.resolve({ done: false, value: first[i++]! }) : new Promise<IteratorResult<string>>(() => undefined)),
        return: () => {
          returned = true;
          return Promise.resolve({ done: true, value: undefined });
        },
      };
    },
  };
  return { body, returned: () => returned };
}

describe('untilAborted (the pump never waits on a body past its abort)', () => {
  it('passes chunks through, then ends with the abort even while the body waits forever, and stops the body', async () => {
    const { body, returned } = stalledBody(['a', 'b']);
    const abort = new AbortController();
    const seen: string[] = [];
    const reading = (async () => {
      for await (const chunk of untilAborted(body, abort.signal)) seen.push(chunk);
    })();
    await new Promise((r) => setTimeout(r, 20));
    abort.abort('deadline');
    await expect(reading).rejects.toThrow('deadline');
    expect(seen).toEqual(['a', 'b']);
    expect(returned()).toBe(true);
  });

  it('an already aborted signal yields nothing; a body that ends ends the loop', async () => {
    const abort = new AbortController();
    abort.abort();
    await expect((async () => { for await (const _ of untilAborted(stalledBody(['x']).body, abort.signal)) void _; })()).rejects.toThrow();
    const done: string[] = [];
    for await (const chunk of untilAborted((async function* () { yield 'only'; })(), new AbortController().signal)) done.push(chunk);
    expect(done).toEqual(['only']);
  });

  it('responseIds reads response ids of a message or a batch, never of requests', () => {
    expect(responseIds('{"jsonrpc":"2.0","id":7,"result":{}}')).toEqual(['7']);
    expect(responseIds('[{"jsonrpc":"2.0","id":"a","error":{}},{"jsonrpc":"2.0","id":1,"method":"x"}]')).toEqual(['"a"']);
    expect(responseIds('not json')).toEqual([]);
  });
});
