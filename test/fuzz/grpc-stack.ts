import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Client, credentials, Metadata, status } from '@grpc/grpc-js';
import type { ServiceError } from '@grpc/grpc-js';
import { CursorServiceService, EventKind, readCallFailure } from '@tether/cursor-proto';
import type { CallFailure, CursorServiceServer } from '@tether/cursor-proto';
import { startNatsServer, startServiceProcess } from '@tether/testing';
import type { NatsServer, ServiceProcess } from '@tether/testing';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SERVICE_MAIN = 'services/session-log/dist/main.js';

/** Callers the service knows (secrets are at least 16 characters), and two it does not. */
export const CALLERS = {
  fuzz: 'fuzz-secret-0123456789',
  other: 'other-secret-0123456789',
} as const;
export type Caller = keyof typeof CALLERS | 'none' | 'wrong';

/**
 * Limits lowered from their defaults so the fuzzer reaches both sides of
 * them cheaply: payloads (4 KiB), batch entries (16), and streams per caller
 * (20: the suite never holds more than one open, so a cancelled Resume or
 * Follow the service fails to release shows up as `too_many_streams`).
 */
export const LIMITS = { maxPayloadBytes: 4_096, maxBatchEntries: 16, maxStreamsPerCaller: 20 } as const;

/**
 * Longest a unary call, or the first message of a Resume or WatchControl, may
 * take before it counts as a hang. A bound on "never hangs", not a latency
 * claim (answers take milliseconds; the slowest is printed in the summary):
 * a CI run on a loaded 2-core machine once saw 10-15 s with no answer to a
 * call that does no I/O, so the bound is generous.
 */
export const ANSWER_MS = 20_000;
/** How long a server stream is read before we cancel it (Follow and the GET stream never end by themselves). */
export const STREAM_READ_MS = 100;

/**
 * The methods of CursorService the fuzzer calls with one request message
 * (the generated server type also has a string index signature).
 * HoldPresence, the one bidirectional call, is exercised by the gateway's
 * presence tests instead.
 */
export type RpcName = Exclude<keyof CursorServiceServer & keyof typeof CursorServiceService, 'holdPresence' | 'serveCancels'>;

/** The outcome of one call, bounded. */
type Answer =
  | { readonly t: 'ok'; readonly messages: readonly Buffer[]; readonly cut: boolean }
  | { readonly t: 'failed'; readonly failure: CallFailure; readonly messages: readonly Buffer[] }
  | { readonly t: 'no-answer'; readonly why: string; readonly messages: readonly Buffer[] };
/** An answer and how long it took (a no-answer's `why` also has the load average, for the report). */
export type CallOutcome = Answer & { readonly elapsedMs: number };

/** A real session of the service with marked events on three streams. */
export interface SeededLog {
  readonly sessionId: string;
  readonly epoch: string;
  readonly principal: string;
  readonly marker: string;
  /** Every event id appended, in order, across streams `0` and two POST streams. */
  readonly ids: readonly string[];
  readonly streams: readonly string[];
}

export interface GrpcStack {
  readonly nats: NatsServer;
  readonly service: ServiceProcess;
  readonly target: string;
  /** Calls a method with request bytes as given (typed callers encode first). */
  call(rpc: RpcName, bytes: Uint8Array, caller: Caller): Promise<CallOutcome>;
  /** Calls with a typed request, encoded by the generated codec. */
  callTyped(rpc: RpcName, request: unknown, caller: Caller): Promise<CallOutcome>;
  decode(rpc: RpcName, message: Buffer): unknown;
  seed(principal: string): Promise<SeededLog>;
  /** Process alive and `grpc.health.v1.Health/Check` SERVING. */
  healthy(): Promise<{ ok: true } | { ok: false; why: string }>;
  /** SIGTERM; returns the exit status and how long the stop took (a leaked call holds it for its 5 s grace). */
  stop(): Promise<{ code: number | null; signal: string | null; tookMs: number }>;
}

type Definition = {
  readonly path: string;
  readonly responseStream: boolean;
  readonly requestSerialize: (value: never) => Buffer;
  readonly responseDeserialize: (value: Buffer) => unknown;
};
const definitions: Readonly<Record<RpcName, Definition>> = CursorServiceService;

export async function startGrpcStack(): Promise<GrpcStack> {
  if (!existsSync(`${ROOT}/${SERVICE_MAIN}`)) throw new Error(`${SERVICE_MAIN} is missing: run \`npx tsc -b\` first (npm test does)`);
  const nats = await startNatsServer();
  let service: ServiceProcess;
  try {
    service = await startServiceProcess({
      name: 'session-log-fuzz',
      command: process.execPath,
      args: [
        SERVICE_MAIN, '--port', '0', '--nats', nats.url,
        '--token', `fuzz:${CALLERS.fuzz}`, '--token', `other:${CALLERS.other}`,
        '--max-payload-bytes', String(LIMITS.maxPayloadBytes),
        '--max-batch-entries', String(LIMITS.maxBatchEntries),
        '--max-streams-per-caller', String(LIMITS.maxStreamsPerCaller),
      ],
      cwd: ROOT,
      readyLine: (j) => j.msg === 'listening' && typeof j.port === 'number',
    });
  } catch (err) {
    await nats.cleanup();
    throw err;
  }
  const target = `127.0.0.1:${service.port}`;
  const client = new Client(target, credentials.createInsecure());
  let exited: string | undefined;
  void service.exited.then((s) => (exited = `the service process exited (code ${s.code}, signal ${s.signal})`));

  const metadataOf = (caller: Caller): Metadata => {
    const m = new Metadata();
    if (caller === 'fuzz' || caller === 'other') m.set('authorization', `Bearer ${CALLERS[caller]}`);
    if (caller === 'wrong') m.set('authorization', 'Bearer not-a-configured-secret-000');
    return m;
  };

  const call = async (rpc: RpcName, bytes: Uint8Array, caller: Caller): Promise<CallOutcome> => {
    const started = performance.now();
    const answer = await answerOf(rpc, bytes, caller);
    const elapsedMs = performance.now() - started;
    if (answer.t !== 'no-answer') return { ...answer, elapsedMs };
    return { ...answer, why: `${answer.why} (load average ${loadavg().map((n) => n.toFixed(1)).join(' ')})`, elapsedMs };
  };

  const answerOf = (rpc: RpcName, bytes: Uint8Array, caller: Caller): Promise<Answer> => {
    const def = definitions[rpc];
    const identity = (b: Buffer): Buffer => b;
    const arg = Buffer.from(bytes);
    if (!def.responseStream) {
      return new Promise((resolve) => {
        client.makeUnaryRequest(def.path, identity, identity, arg, metadataOf(caller), { deadline: Date.now() + ANSWER_MS }, (err, value) => {
          if (err === null) resolve({ t: 'ok', messages: value === undefined ? [] : [value], cut: false });
          else resolve(outcomeOf(err, []));
        });
      });
    }
    return new Promise((resolve) => {
      const messages: Buffer[] = [];
      let cut = false;
      // A bound on the whole call, our cut included: nothing can hang the suite.
      const stream = client.makeServerStreamRequest(def.path, identity, identity, arg, metadataOf(caller), { deadline: Date.now() + ANSWER_MS + 2_000 });
      // Follow may legitimately stay silent (nothing after the cursor yet);
      // Resume and WatchControl must say something (ack, "subscribed" or a status) first.
      const mustSpeak = rpc !== 'follow';
      let firstTimer: NodeJS.Timeout | undefined = mustSpeak
        ? setTimeout(() => {
            stream.cancel();
            settle({ t: 'no-answer', why: `${rpc} sent neither a message nor a status within ${ANSWER_MS} ms`, messages });
          }, ANSWER_MS)
        : undefined;
      let cutTimer: NodeJS.Timeout | undefined = mustSpeak ? undefined : setTimeout(() => ((cut = true), stream.cancel()), STREAM_READ_MS);
      let settled = false;
      const settle = (outcome: Answer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(firstTimer);
        clearTimeout(cutTimer);
        resolve(outcome);
      };
      stream.on('data', (chunk: Buffer) => {
        messages.push(chunk);
        if (firstTimer !== undefined) {
          clearTimeout(firstTimer);
          firstTimer = undefined;
          cutTimer = setTimeout(() => ((cut = true), stream.cancel()), STREAM_READ_MS);
        }
      });
      stream.on('error', (err: ServiceError) => {
        if (cut && err.code === status.CANCELLED) settle({ t: 'ok', messages, cut: true });
        else settle(outcomeOf(err, messages));
      });
      stream.on('status', (s: { code: number }) => {
        if (s.code === status.OK) settle({ t: 'ok', messages, cut });
      });
    });
  };

  const stack: GrpcStack = {
    nats,
    service,
    target,
    call,
    callTyped: (rpc, request, caller) => call(rpc, definitions[rpc].requestSerialize(request as never), caller),
    decode: (rpc, message) => definitions[rpc].responseDeserialize(message),
    async seed(principal) {
      const marker = `ZQXMARK${randomBytes(8).toString('hex').toUpperCase()}`;
      const opened = await expectOk(stack, 'openSession', { principal, meta: { purpose: 'fuzz seed' } });
      const session = (opened as { session?: { sessionId: string; epoch: string } }).session;
      if (session === undefined) throw new Error('seed: OpenSession answered no session');
      const streams = ['0', randomStream(), randomStream()];
      const ids: string[] = [];
      for (const [i, stream] of streams.entries()) {
        const kinds = [EventKind.PRIME, EventKind.EVENT, EventKind.EVENT, EventKind.EVENT, ...(stream === '0' ? [] : [EventKind.END])];
        for (const [n, kind] of kinds.entries()) {
          const payload = kind === EventKind.EVENT ? Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { marker, stream: i, n } })) : Buffer.alloc(0);
          const appended = (await expectOk(stack, 'append', { sessionId: session.sessionId, stream, kind, payload, endReason: 0 })) as { id: string };
          ids.push(appended.id);
        }
      }
      return { sessionId: session.sessionId, epoch: session.epoch, principal, marker, ids, streams };
    },
    async healthy() {
      if (exited !== undefined) return { ok: false, why: exited };
      const answer = await new Promise<{ err: ServiceError | null; value: Buffer | undefined }>((resolve) =>
        client.makeUnaryRequest('/grpc.health.v1.Health/Check', (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(0), new Metadata(), { deadline: Date.now() + ANSWER_MS }, (err, value) => resolve({ err, value })),
      );
      if (answer.err !== null) return { ok: false, why: `health check failed: ${answer.err.code} ${answer.err.details}` };
      // HealthCheckResponse { status = 1 }: SERVING is 1, encoded 08 01.
      const serving = answer.value !== undefined && answer.value.length === 2 && answer.value[0] === 0x08 && answer.value[1] === 0x01;
      return serving ? { ok: true } : { ok: false, why: `health answered ${answer.value?.toString('hex') ?? '(nothing)'}, not SERVING` };
    },
    async stop() {
      client.close();
      const started = performance.now();
      const s = await service.stop('SIGTERM', 10_000);
      const tookMs = performance.now() - started;
      await nats.cleanup();
      return { code: s.code, signal: s.signal, tookMs };
    },
  };
  return stack;
}

async function expectOk(stack: GrpcStack, rpc: RpcName, request: unknown): Promise<unknown> {
  const outcome = await stack.callTyped(rpc, request, 'fuzz');
  if (outcome.t !== 'ok' || outcome.messages[0] === undefined) throw new Error(`seed: ${rpc} failed: ${JSON.stringify(outcome.t === 'failed' ? outcome.failure : outcome)}`);
  return stack.decode(rpc, outcome.messages[0]);
}

function outcomeOf(err: ServiceError, messages: Buffer[]): Answer {
  if (err.code === status.DEADLINE_EXCEEDED) return { t: 'no-answer', why: `DEADLINE_EXCEEDED after ${ANSWER_MS} ms: ${err.details}`, messages };
  return { t: 'failed', failure: readCallFailure(err), messages };
}

function randomStream(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  return [...randomBytes(8)].map((b) => alphabet[b % 32]).join('');
}
