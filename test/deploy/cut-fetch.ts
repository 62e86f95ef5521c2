/**
 * A fetch for the official SDK client that breaks SSE streams on purpose:
 * the n-th stream it sees (a tools/call POST answered with SSE, or a resume
 * GET carrying Last-Event-ID) is cut after `plan[n]` events. The cut errors
 * the body the SDK reads (so it reconnects with its last event id, exactly as
 * after a network failure) and cancels the real body, which makes undici
 * destroy the client's socket: nginx sees the client go away (its access
 * log shows the request as not completed) and closes its connection to the
 * gateway.
 */
export interface CutRecord {
  readonly kind: 'post' | 'resume';
  readonly afterEvents: number;
  readonly at: number;
}

export interface CuttingFetch {
  readonly fetch: typeof fetch;
  readonly cuts: CutRecord[];
}

export function createCuttingFetch(plan: readonly number[]): CuttingFetch {
  const remaining = [...plan];
  const cuts: CutRecord[] = [];
  const cuttingFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await fetch(input, init);
    const method = (init?.method ?? 'GET').toUpperCase();
    const headers = new Headers(init?.headers);
    const kind = method === 'POST' && typeof init?.body === 'string' && init.body.includes('"tools/call"') ? 'post' : method === 'GET' && headers.has('last-event-id') ? 'resume' : undefined;
    const isSse = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
    if (kind === undefined || !isSse || res.body === null || remaining.length === 0) return res;
    const afterEvents = remaining.shift()!;
    const body = cutAfter(res.body, afterEvents, () => cuts.push({ kind, afterEvents, at: Date.now() }));
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return { fetch: cuttingFetch as typeof fetch, cuts };
}

/** Passes chunks through until `events` complete SSE events went by, then errors the stream and cancels the source. */
function cutAfter(source: ReadableStream<Uint8Array>, events: number, onCut: () => void): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  const decoder = new TextDecoder();
  let seen = 0;
  let tail = '';
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      // Cut on the pull after the one that delivered the n-th event, so the
      // consumer got that chunk before the error.
      if (seen >= events) {
        onCut();
        controller.error(new Error(`cut by the test after ${seen} events`));
        await reader.cancel('cut by the test').catch(() => undefined);
        return;
      }
      const { value, done } = await reader.read();
      if (done) return controller.close();
      controller.enqueue(value);
      // Events end with a blank line; count boundaries across chunk edges.
      const text = tail + decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      const parts = text.split('\n\n');
      tail = parts.pop() ?? '';
      seen += parts.length;
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
    // Pull only on demand: a chunk is handed to a waiting reader, never left
    // queued when the stream errors (an error discards the queue).
  }, { highWaterMark: 0 });
}
