import { SseParser } from '@tether/protocol';

type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** A fetch that drops the connection of tool streams, like a proxy killing it. */
export interface Cutter {
  readonly fetch: FetchLike;
  /** How many streams it has cut. */
  readonly cuts: number;
}

/**
 * Wraps fetch so that the SSE answer of each `tools/call` POST breaks after
 * `afterEvents` events (blocks with an id or data): the connection is closed and the
 * body errors, as with a network failure. Resumes (GETs) pass untouched.
 */
export function createCutter(afterEvents: number, base: FetchLike = (i, init) => globalThis.fetch(i, init)): Cutter {
  let cuts = 0;
  const fetch: FetchLike = async (input, init) => {
    const res = await base(input, init);
    const isToolCall = init?.method === 'POST' && typeof init.body === 'string' && init.body.includes('"tools/call"');
    if (!isToolCall || res.body === null || !(res.headers.get('content-type') ?? '').includes('text/event-stream')) return res;
    const reader = res.body.getReader();
    const parser = new SseParser();
    let seen = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (seen >= afterEvents) {
          cuts += 1;
          await reader.cancel();
          controller.error(new TypeError('terminated: connection cut by the zoo'));
          return;
        }
        const r = await reader.read();
        if (r.done) return controller.close();
        seen += parser.push(r.value).filter((m) => (m.id !== undefined && m.id !== '') || m.data !== '').length;
        controller.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return {
    fetch,
    get cuts() {
      return cuts;
    },
  };
}
