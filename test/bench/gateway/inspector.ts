/**
 * A minimal client of a child's V8 inspector (started with
 * `--inspect=127.0.0.1:0`): enough WebSocket (RFC 6455) to send a command
 * and read its answer, so the benchmark can force a full GC in the gateway
 * and read its heap use before reading RSS. Without it, RSS mostly measures
 * when V8 last collected. Node 20 has no WebSocket client without a flag.
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import type { Socket } from 'node:net';

export interface Inspector {
  /** Sends one inspector command and resolves with its `result`. */
  call(method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>>;
  /** Calls `handler` with the params of every event named `method` (e.g. `HeapProfiler.addHeapSnapshotChunk`) until the returned function is called. */
  on(method: string, handler: (params: Record<string, unknown>) => void): () => void;
  close(): void;
}

/** The `ws://` URL a child printed on stderr ("Debugger listening on ws://…"). */
export function inspectorUrl(stderrLines: readonly string[]): string | undefined {
  for (const line of stderrLines) {
    const m = /Debugger listening on (ws:\/\/\S+)/.exec(line);
    if (m !== null) return m[1];
  }
  return undefined;
}

export function connectInspector(wsUrl: string, timeoutMs = 60_000): Promise<Inspector> {
  const url = new URL(wsUrl);
  return new Promise((resolve, reject) => {
    const req = request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': randomBytes(16).toString('base64') },
    });
    req.on('error', reject);
    req.on('response', (res) => reject(new Error(`inspector at ${wsUrl} answered ${res.statusCode ?? 0} instead of upgrading`)));
    req.on('upgrade', (_res, socket: Socket, head: Buffer) => {
      let buffer = head;
      let nextId = 1;
      const waiting = new Map<number, { done: (r: Record<string, unknown>) => void; fail: (e: Error) => void; timer: NodeJS.Timeout }>();
      const handlers = new Map<string, Set<(params: Record<string, unknown>) => void>>();
      socket.on('data', (chunk: Buffer) => {
        buffer = Buffer.concat([buffer, chunk]);
        for (;;) {
          const frame = readFrame(buffer);
          if (frame === undefined) break;
          buffer = buffer.subarray(frame.length);
          if (frame.opcode !== 1) continue; // only text frames carry protocol messages
          const message = JSON.parse(frame.payload.toString('utf8')) as { id?: number; method?: string; params?: Record<string, unknown>; result?: Record<string, unknown>; error?: { message?: string } };
          if (message.id === undefined && message.method !== undefined) {
            for (const h of handlers.get(message.method) ?? []) h(message.params ?? {});
            continue;
          }
          const waiter = message.id === undefined ? undefined : waiting.get(message.id);
          if (waiter === undefined) continue;
          waiting.delete(message.id!);
          clearTimeout(waiter.timer);
          if (message.error !== undefined) waiter.fail(new Error(`inspector: ${message.error.message ?? 'error'}`));
          else waiter.done(message.result ?? {});
        }
      });
      socket.on('close', () => {
        for (const w of waiting.values()) w.fail(new Error('inspector connection closed'));
        waiting.clear();
      });
      resolve({
        call(method, params = {}) {
          const id = nextId++;
          return new Promise((done, fail) => {
            const timer = setTimeout(() => {
              waiting.delete(id);
              fail(new Error(`inspector: ${method} took longer than ${timeoutMs} ms`));
            }, timeoutMs);
            waiting.set(id, { done, fail, timer });
            socket.write(textFrame(JSON.stringify({ id, method, params })));
          });
        },
        on(method, handler) {
          let set = handlers.get(method);
          if (set === undefined) handlers.set(method, (set = new Set()));
          set.add(handler);
          return () => void set.delete(handler);
        },
        close() {
          socket.end(Buffer.from([0x88, 0x80, 0, 0, 0, 0])); // masked close frame, empty
          socket.destroy();
        },
      });
    });
    req.end();
  });
}

/** A masked (client-to-server) text frame. */
function textFrame(text: string): Buffer {
  const payload = Buffer.from(text, 'utf8');
  const mask = randomBytes(4);
  const length = payload.length < 126 ? Buffer.from([0x80 | payload.length]) : payload.length < 65_536 ? Buffer.from([0x80 | 126, payload.length >> 8, payload.length & 0xff]) : lengthOf64(payload.length);
  const masked = Buffer.alloc(payload.length);
  for (let i = 0; i < payload.length; i += 1) masked[i] = payload[i]! ^ mask[i % 4]!;
  return Buffer.concat([Buffer.from([0x81]), length, mask, masked]);
}

function lengthOf64(n: number): Buffer {
  const b = Buffer.alloc(9);
  b[0] = 0x80 | 127;
  b.writeBigUInt64BE(BigInt(n), 1);
  return b;
}

/** One unmasked server frame from the start of `buf`, or undefined if incomplete. */
function readFrame(buf: Buffer): { opcode: number; payload: Buffer; length: number } | undefined {
  if (buf.length < 2) return undefined;
  const opcode = buf[0]! & 0x0f;
  let len = buf[1]! & 0x7f;
  let offset = 2;
  if (len === 126) {
    if (buf.length < 4) return undefined;
    len = buf.readUInt16BE(2);
    offset = 4;
  } else if (len === 127) {
    if (buf.length < 10) return undefined;
    len = Number(buf.readBigUInt64BE(2));
    offset = 10;
  }
  if (buf.length < offset + len) return undefined;
  return { opcode, payload: buf.subarray(offset, offset + len), length: offset + len };
}
