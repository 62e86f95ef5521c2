import { SseParser, encodeSseEvent } from '@tether/protocol';
import { BlockBoundaries } from './boundary.js';
import type { StreamCheck, StreamFinding } from './check.js';

/** What `guardBody` asks of its owner. */
export interface GuardBodyHooks {
  /** Events up to these ids were handed to the client. */
  delivered(ids: readonly string[]): void;
  /**
   * The stream broke. Returns bytes to hand the client instead (an SSE error
   * event for its pending requests) and the error to end the stream with when
   * there are none.
   */
  violated(finding: StreamFinding): Promise<{ readonly replacement: Uint8Array | undefined; readonly error: Error }>;
}

/**
 * Wraps an SSE response body. Every chunk is parsed before anything of it is
 * passed on, and bytes are passed on only up to the end of a block whose
 * events all passed the check: a client's SSE parser dispatches an event only
 * at the blank line that ends it, so the client never sees a failing event,
 * nor half of any block.
 *
 * A resumed stream is held back entirely until `check.verified`: the first
 * resumed event reaches the client only after it passed (DESIGN §1).
 *
 * `resumedFrom` is the cursor of a resumed stream. If such a stream breaks
 * or ends before any id reached the client (no acknowledgment, no event),
 * the client gets its own cursor back as an id-only event and a clean end,
 * not the error: the SDK clients (v1 1.32, v2 2.4) keep only ids seen on the
 * current response, and would otherwise reconnect without `Last-Event-ID`,
 * which never resumes a request's stream (finding 17, docs/reliability.md).
 * A clean end, because erroring a stream drops what it still queues.
 */
export function guardBody(source: ReadableStream<Uint8Array>, check: StreamCheck, hooks: GuardBodyHooks, resumedFrom?: string): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  const parser = new SseParser();
  const boundaries = new BlockBoundaries();
  // Bytes not passed on yet, and how many of them end at a block boundary.
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  let complete = 0;
  let finished = false;
  // Whether the client has an id from this response (always, for a fresh stream).
  let holdsCursor = resumedFrom === undefined;

  /** Hands a resumed stream's client its cursor when nothing of the stream gave it one. Returns whether it did. */
  const keepCursor = (controller: ReadableStreamDefaultController<Uint8Array>): boolean => {
    if (holdsCursor || resumedFrom === undefined) return false;
    holdsCursor = true;
    controller.enqueue(new TextEncoder().encode(encodeSseEvent({ id: resumedFrom, data: '' })));
    return true;
  };

  const fail = async (controller: ReadableStreamDefaultController<Uint8Array>, finding: StreamFinding): Promise<void> => {
    finished = true;
    held = [];
    reader.cancel().catch(() => undefined);
    const { replacement, error } = await hooks.violated(finding);
    if (replacement === undefined) {
      controller.error(error);
      return;
    }
    // Everything passed on so far ends at a block boundary, so the error
    // event is a block of its own.
    controller.enqueue(replacement);
    controller.close();
  };

  /** Passes on the complete blocks held (or everything, at the end). Returns whether anything went. */
  const release = (controller: ReadableStreamDefaultController<Uint8Array>, all: boolean): boolean => {
    const n = all ? heldBytes : complete;
    if (n === 0) return false;
    const bytes = concat(held, heldBytes);
    controller.enqueue(bytes.subarray(0, n));
    held = n < heldBytes ? [bytes.subarray(n)] : [];
    heldBytes -= n;
    complete = 0;
    // What went ends at a block boundary, so it holds the acknowledgment or
    // the first verified event whole once the check accepted either.
    holdsCursor ||= check.verified || check.acknowledged;
    hooks.delivered(check.commit());
    return true;
  };

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      // Loop until something is enqueued (or the stream ends): a pull that
      // enqueues nothing would not be called again.
      while (!finished) {
        let r: Awaited<ReturnType<typeof reader.read>>;
        try {
          r = await reader.read();
        } catch (err) {
          finished = true;
          if (keepCursor(controller)) return controller.close();
          controller.error(err);
          return;
        }
        if (r.done) {
          parser.end();
          const finding = check.end();
          if (finding !== undefined) return fail(controller, finding);
          // What is left is comments, retry hints or an unterminated block,
          // which the client's parser discards at the end anyway.
          release(controller, true);
          keepCursor(controller);
          finished = true;
          controller.close();
          return;
        }
        let finding: StreamFinding | undefined;
        try {
          for (const m of parser.push(r.value)) {
            finding = check.push(m);
            if (finding !== undefined) break;
          }
        } catch (err) {
          // SseLimitError: the stream cannot be parsed, so it cannot be checked.
          finished = true;
          reader.cancel(err).catch(() => undefined);
          controller.error(err);
          return;
        }
        if (finding !== undefined) return fail(controller, finding);
        const end = boundaries.scan(r.value);
        if (end !== -1) complete = heldBytes + end;
        held.push(r.value);
        heldBytes += r.value.length;
        // Verified events, or only the resume acknowledgment so far, go out now.
        if ((check.verified || check.ackOnly) && release(controller, false)) return;
      }
    },
    cancel(reason) {
      finished = true;
      return reader.cancel(reason);
    },
  });
}

function concat(chunks: readonly Uint8Array[], total: number): Uint8Array {
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
