import { connect } from 'node:net';

/** Writes `requests` back to back on one socket (HTTP/1.1 pipelining) and returns each answer's body, in order. */
export async function pipelined(url: string, requests: string[]): Promise<string[]> {
  const { port, pathname } = new URL(url);
  const socket = connect(Number(port), '127.0.0.1');
  // Each request is written for `POST /mcp`; the URL's path replaces it.
  socket.write(requests.map((r) => r.replace('POST /mcp ', `POST ${pathname} `)).join(''));
  const parser = new PipelinedAnswers(requests.length);
  for await (const chunk of socket) {
    if (parser.push(chunk as Buffer)) break;
  }
  socket.destroy();
  return parser.bodies;
}

/** Splits HTTP/1.1 answers read from one socket: a content-length body, or a chunked one. */
class PipelinedAnswers {
  readonly bodies: string[] = [];
  #buffer = Buffer.alloc(0);
  constructor(private readonly count: number) {}

  /** Adds bytes; true once `count` answers are complete. */
  push(chunk: Buffer): boolean {
    this.#buffer = Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      const headEnd = this.#buffer.indexOf('\r\n\r\n');
      if (headEnd < 0) break;
      const head = this.#buffer.subarray(0, headEnd).toString('latin1');
      const length = /content-length: *(\d+)/i.exec(head);
      let rest = this.#buffer.subarray(headEnd + 4);
      if (length !== null) {
        const n = Number(length[1]);
        if (rest.length < n) break;
        this.bodies.push(rest.subarray(0, n).toString('utf8'));
        this.#buffer = rest.subarray(n);
        continue;
      }
      // Chunked: size line, data, CRLF, until a zero-size chunk.
      const parts: Buffer[] = [];
      let done = false;
      for (;;) {
        const lineEnd = rest.indexOf('\r\n');
        if (lineEnd < 0) break;
        const size = parseInt(rest.subarray(0, lineEnd).toString('latin1'), 16);
        if (rest.length < lineEnd + 2 + size + 2) break;
        parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
        rest = rest.subarray(lineEnd + 2 + size + 2);
        if (size === 0) {
          done = true;
          break;
        }
      }
      if (!done) break;
      this.bodies.push(Buffer.concat(parts).toString('utf8'));
      this.#buffer = rest;
    }
    return this.bodies.length >= this.count;
  }
}

