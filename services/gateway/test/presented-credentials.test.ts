import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Internal modules (not the package's entry): the credentials of the gateway's own upstream calls.
import { PresentedCredentials } from '../src/auth/presented-credentials.js';
import type { Caller } from '../src/auth/authenticator.js';
import { openStreamAsCaller } from '../src/upstream-stream.js';

const caller = (token: string, route = '/mcp', principal = 'p1'): Caller => ({ principal, route, upstreamHeaders: { authorization: `Bearer ${token}` } });

/** An upstream that validates tokens itself: only `Bearer fresh` gets the event stream, anything else 401. */
let server: Server;
let url: string;
const seen: (string | undefined)[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req.headers.authorization);
    if (req.headers.authorization !== 'Bearer fresh') return void res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end('id: 1\ndata: {}\n\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('PresentedCredentials', () => {
  it('a call made on a caller\'s behalf takes the newest credentials its principal presented on the route, not the first', () => {
    const store = new PresentedCredentials();
    const first = caller('old');
    store.present(first);
    const creds = store.of(first, '2025-11-25');
    expect(creds.current()).toEqual({ authorization: 'Bearer old', 'mcp-protocol-version': '2025-11-25' });
    store.present(caller('new'));
    expect(creds.current()).toEqual({ authorization: 'Bearer new', 'mcp-protocol-version': '2025-11-25' });
    // Another route, or another principal, is never mixed in.
    store.present(caller('other-route', '/b'));
    store.present(caller('other-principal', '/mcp', 'p2'));
    expect(creds.current().authorization).toBe('Bearer new');
  });

  it('renewed() waits for the next token, and gives up when its wait passes or its signal aborts', async () => {
    const store = new PresentedCredentials();
    store.present(caller('old'));
    const creds = store.of(caller('old'), undefined);
    const used = creds.current();
    const waiting = creds.renewed(used, new AbortController().signal, 5_000);
    setTimeout(() => store.present(caller('new')), 50);
    expect(await waiting).toBe(true);
    // Already renewed since `used`: at once.
    expect(await creds.renewed(used, AbortSignal.timeout(10), 5_000)).toBe(true);
    expect(await creds.renewed(creds.current(), new AbortController().signal, 30)).toBe(false);
    const abort = new AbortController();
    const aborted = creds.renewed(creds.current(), abort.signal, 5_000);
    abort.abort();
    expect(await aborted).toBe(false);
  });

  it('keeps at most maxEntries principals: the least recently presented goes first', () => {
    const store = new PresentedCredentials(2);
    const a = store.of(caller('a1', '/mcp', 'a'), undefined);
    store.present(caller('a2', '/mcp', 'a'));
    store.present(caller('b', '/mcp', 'b'));
    store.present(caller('c', '/mcp', 'c'));
    // a's entry is gone; its calls keep the headers they last had.
    expect(a.current().authorization).toBe('Bearer a1');
  });
});

describe('openStreamAsCaller', () => {
  it('an upstream 401 on a reconnect waits for the client\'s next token, then connects with it', async () => {
    const store = new PresentedCredentials();
    store.present(caller('expired'));
    const creds = store.of(caller('expired'), undefined);
    seen.length = 0;
    setTimeout(() => store.present(caller('fresh')), 100);
    const answer = await openStreamAsCaller(url, { accept: 'text/event-stream' }, creds, new AbortController().signal);
    expect(answer.status).toBe(200);
    answer.close();
    expect(seen).toEqual(['Bearer expired', 'Bearer fresh']);
  });

  it('strip (no Authorization of the caller\'s): a 401 is final at once, no wait for a token that would change nothing', async () => {
    const store = new PresentedCredentials();
    const stripped: Caller = { principal: 'p1', route: '/mcp', upstreamHeaders: { 'tether-principal': 'p1' } };
    store.present(stripped);
    // A wait would last RENEWAL_WAIT_MS (5 minutes): far past this test's timeout, which then fails it.
    const answer = await openStreamAsCaller(url, { accept: 'text/event-stream' }, store.of(stripped, undefined), new AbortController().signal);
    expect(answer.status).toBe(401);
    answer.close();
  });

  it('no new token within the wait: the 401 is answered as it came', async () => {
    const store = new PresentedCredentials();
    store.present(caller('expired'));
    const creds = store.of(caller('expired'), undefined);
    const abort = new AbortController();
    // The wait ends (as a client's request would) once the upstream has refused the token: a
    // fixed 100 ms from the start ran out before the first answer on a loaded machine.
    const before = seen.length;
    const refused = setInterval(() => {
      if (seen.length === before) return;
      clearInterval(refused);
      setTimeout(() => abort.abort(), 50);
    }, 10);
    const answer = await openStreamAsCaller(url, { accept: 'text/event-stream' }, creds, abort.signal).finally(() => clearInterval(refused));
    expect(answer.status).toBe(401);
    expect(seen.slice(before)).toEqual(['Bearer expired']);
    answer.close();
  });
});
