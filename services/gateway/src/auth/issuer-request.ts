import { request } from 'undici';

/** Why a request to the issuer (its keys, its introspection endpoint) got no answer to judge. */
export const IssuerRequestErrorCode = {
  /** The whole exchange (connect, headers, body) outlasted its deadline. */
  timedOut: 'timed_out',
  /** The answer is larger than the caller's limit; reading stopped there. */
  tooLarge: 'too_large',
  /** No answer: refused, reset, DNS, TLS, … */
  unreachable: 'unreachable',
} as const;
export type IssuerRequestErrorCode = (typeof IssuerRequestErrorCode)[keyof typeof IssuerRequestErrorCode];

/** A failed request to the issuer; `message` is safe to show (no URL, no body). */
export class IssuerRequestError extends Error {
  override readonly name = 'IssuerRequestError';
  constructor(
    readonly code: IssuerRequestErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface IssuerRequestOptions {
  readonly method: 'GET' | 'POST';
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  /** One deadline for the whole exchange: connecting, the headers and every byte of the body. */
  readonly timeoutMs: number;
  /** The largest body read; past it reading stops and the request fails with `too_large`. */
  readonly maxBytes: number;
}

/** The issuer's answer: any status (the caller judges it) and the body as text. */
export interface IssuerAnswer {
  readonly status: number;
  readonly text: string;
}

/**
 * One bounded HTTP exchange with the issuer. undici's own `headersTimeout`
 * and `bodyTimeout` are per phase and per chunk, so an endpoint that sends a
 * byte a second would hold a request (and grow its buffer) forever: here one
 * timer aborts the whole exchange, and the body is counted as it arrives,
 * never buffered whole before its size is known.
 * @throws IssuerRequestError `timed_out`, `too_large` or `unreachable`.
 */
export async function issuerRequest(url: string, options: IssuerRequestOptions): Promise<IssuerAnswer> {
  const { timeoutMs, maxBytes } = options;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  try {
    const answer = await request(url, {
      method: options.method,
      headers: options.headers,
      ...(options.body === undefined ? {} : { body: options.body }),
      signal: deadline.signal,
    });
    const declared = Number(answer.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBytes) {
      answer.body.destroy();
      throw tooLarge(maxBytes);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of answer.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      // Leaving the loop destroys the body, which closes the connection: nothing more is read.
      if (size > maxBytes) throw tooLarge(maxBytes);
      chunks.push(chunk);
    }
    return { status: answer.statusCode, text: Buffer.concat(chunks).toString('utf8') };
  } catch (err) {
    if (err instanceof IssuerRequestError) throw err;
    if (deadline.signal.aborted) throw new IssuerRequestError(IssuerRequestErrorCode.timedOut, `timed out after ${timeoutMs} ms`, { cause: err });
    throw new IssuerRequestError(IssuerRequestErrorCode.unreachable, networkReason(err), { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

const tooLarge = (maxBytes: number): IssuerRequestError => new IssuerRequestError(IssuerRequestErrorCode.tooLarge, `the answer is larger than ${maxBytes} bytes`);

/** `ECONNREFUSED`, `UND_ERR_SOCKET`, …: a code, never a URL or a body. */
function networkReason(err: unknown): string {
  const own = (err as { code?: unknown }).code;
  if (typeof own === 'string') return own;
  const cause = (err as { cause?: { code?: unknown } }).cause;
  if (typeof cause?.code === 'string') return cause.code;
  return (err as Error)?.name ?? 'unknown error';
}
