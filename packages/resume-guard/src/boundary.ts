const CR = 0x0d;
const LF = 0x0a;

/**
 * Finds where SSE blocks end in a byte stream: right after a blank line,
 * which is where a client's parser dispatches. The guard forwards bytes only
 * up to such a point, so the client never holds half a block: a half block
 * would merge with whatever comes next, including the error event the guard
 * sends when it aborts the stream.
 *
 * Spec: lines end in "a U+000D CARRIAGE RETURN U+000A LINE FEED (CRLF)
 * character pair, a single U+000A LINE FEED (LF) character not preceded by a
 * U+000D CARRIAGE RETURN (CR) character, or a single U+000D CARRIAGE RETURN
 * (CR) character not followed by a U+000A LINE FEED (LF) character". The
 * terminators are ASCII, so scanning bytes is exact under UTF-8.
 */
export class BlockBoundaries {
  #lineEmpty = true;
  #afterCR = false;

  /** The offset in `chunk` just past the last blank line in it, or -1 when it has none. */
  scan(chunk: Uint8Array): number {
    let last = -1;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (b === LF && this.#afterCR) {
        // Second half of a CRLF: the line already ended at the CR.
        this.#afterCR = false;
        continue;
      }
      this.#afterCR = b === CR;
      if (b === CR || b === LF) {
        if (this.#lineEmpty) last = i + 1;
        this.#lineEmpty = true;
      } else {
        this.#lineEmpty = false;
      }
    }
    return last;
  }
}
