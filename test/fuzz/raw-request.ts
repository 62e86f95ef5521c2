import { request } from 'node:http';
import { ANSWER_MS, NoAnswer, OPEN_STREAM_READ_MS } from './gateway-stack.js';
import type { WireResponse } from './gateway-stack.js';

/**
 * One request as header lines, in order and in their case, repeats kept:
 * what `fetch` cannot send (it joins two `Authorization` values into one
 * and writes every name in lower case).
 */
export interface RawRequest {
  readonly method: string;
  readonly path: string;
  /** Every line as it goes on the wire; `sendRaw` adds none (not `Host`, nor framing for a body). */
  readonly headers: readonly (readonly [name: string, value: string])[];
  readonly body: Uint8Array | undefined;
}

/**
 * A request of `lines` with what an HTTP/1.1 server needs first: `host`
 * (else it answers 400 before the gateway sees anything) and, with a body,
 * `content-length` (else Node frames it chunked on its own).
 */
export function rawRequest(origin: string, method: string, path: string, lines: readonly (readonly [string, string])[], body: Uint8Array | undefined): RawRequest {
  const framing: [string, string][] = body === undefined ? [] : [['content-length', String(body.byteLength)]];
  return { method, path, headers: [['host', new URL(origin).host], ...lines, ...framing], body };
}

/**
 * The request's field bytes as Node counts them against `maxHeaderSize`
 * (the names and values, nearly: measured, it refuses between 16,341 and
 * 16,390 such bytes at 16 KiB, by how many lines there are).
 */
export function fieldBytes(req: RawRequest): number {
  return req.headers.reduce((n, [name, value]) => n + Buffer.byteLength(name, 'latin1') + Buffer.byteLength(value, 'latin1'), 0);
}

/**
 * `sendBounded` (gateway-stack.ts) on node:http with raw header lines: the
 * answer's headers, and a whole non-stream body, within ANSWER_MS (else
 * `NoAnswer`); an SSE body still open after `openStreamReadMs` is cut.
 * Values are byte strings (latin1 on the wire).
 */
export function sendRaw(origin: string, req: RawRequest, openStreamReadMs = OPEN_STREAM_READ_MS): Promise<WireResponse> {
  const started = performance.now();
  const url = new URL(origin);
  return new Promise((resolve, reject) => {
    let answered = false;
    const out = request({ host: url.hostname, port: url.port, method: req.method, path: req.path, headers: req.headers.flat(), timeout: ANSWER_MS }, (res) => {
      answered = true;
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(res.headers)) headers[name] = Array.isArray(value) ? value.join(', ') : (value ?? '');
      const chunks: Buffer[] = [];
      let cutOpen = false;
      const isSse = (headers['content-type'] ?? '').startsWith('text/event-stream');
      const cut = isSse ? setTimeout(() => ((cutOpen = true), res.destroy()), openStreamReadMs) : undefined;
      const bound = setTimeout(() => res.destroy(new NoAnswer(`${req.method} answered ${res.statusCode} but its body did not complete within ${ANSWER_MS} ms`)), ANSWER_MS);
      const done = (err?: Error): void => {
        clearTimeout(cut);
        clearTimeout(bound);
        if (err !== undefined && !cutOpen) return reject(err instanceof NoAnswer ? err : new NoAnswer(`${req.method} answered ${res.statusCode} but its body failed: ${err.message}`, { cause: err }));
        resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString('utf8'), cutOpen, elapsedMs: performance.now() - started });
      };
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('end', () => done());
      res.once('close', () => (res.complete ? done() : done(new Error('closed before its end'))));
      res.once('error', (err) => done(err));
    });
    out.once('timeout', () => out.destroy(new Error(`no answer within ${ANSWER_MS} ms`)));
    // A server that answers (a 431) and closes while the request is still being written may reset it: the answer counts.
    out.once('error', (err) => {
      if (!answered) reject(new NoAnswer(`no answer: ${err.message}`, { cause: err }));
    });
    out.end(req.body === undefined ? undefined : Buffer.from(req.body));
  });
}
