import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClientReadableStream } from '@grpc/grpc-js';
import { callUnary, createCursorClient, EventKind, readCallFailure } from '@tether/cursor-proto';
import type { AppendRequest, CallFailure, CursorClientOptions, CursorServiceClient } from '@tether/cursor-proto';
import { startNatsServer, startServiceProcess } from '@tether/testing';
import type { NatsServer, ServiceProcess } from '@tether/testing';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

export const TOKENS = { alice: 'alice-secret-0123456789', bob: 'bob-secret-0123456789ab' } as const;
export const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

/** A test client's options: any of the client's, each may be `undefined` to leave it out. */
export type TestClientOptions = { readonly [K in keyof CursorClientOptions]?: CursorClientOptions[K] | undefined };

/** One real nats-server and any number of real service processes on it. */
export interface ServiceFixture {
  readonly nats: NatsServer;
  /** Starts `tether-session-log` (built dist) with tokens for alice and bob plus `args` (and `env`, e.g. `OTEL_*`). */
  start(args?: readonly string[], name?: string, env?: Readonly<Record<string, string>>): Promise<ServiceProcess & { target: string }>;
  /** A client of `target` (default: the first service started) that closes on teardown; alice's token unless `options.token` says otherwise (`undefined`: none). */
  client(options?: TestClientOptions): CursorServiceClient;
  teardown(): Promise<void>;
}

export async function startServiceFixture(): Promise<ServiceFixture> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npx tsc -b\` first (npm test does)`);
  const nats = await startNatsServer();
  const services: ServiceProcess[] = [];
  const clients: CursorServiceClient[] = [];
  let first: string | undefined;
  return {
    nats,
    async start(args = [], name = `session-log-${services.length + 1}`, env = {}) {
      const proc = await startServiceProcess({
        name,
        command: process.execPath,
        args: [MAIN, '--port', '0', '--nats', nats.url, '--log-level', 'debug', ...args],
        env: { TETHER_GRPC_TOKENS: `alice:${TOKENS.alice},bob:${TOKENS.bob}`, ...env },
        readyLine: (o) => o.msg === 'listening',
      });
      services.push(proc);
      const target = `127.0.0.1:${proc.port}`;
      first ??= target;
      return Object.assign(proc, { target });
    },
    client(options = {}) {
      const merged: TestClientOptions = { target: first ?? '', token: TOKENS.alice, ...options };
      // A key set to undefined (no token) is left out: the client's options are exact.
      const client = createCursorClient(Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== undefined)) as unknown as CursorClientOptions);
      clients.push(client);
      return client;
    },
    async teardown() {
      for (const c of clients) c.close();
      // Every client is closed, so a SIGTERM stops at once. A call the
      // service left open (a leaked stream) holds it for its 5 s grace.
      const started = performance.now();
      const statuses = await Promise.all(services.map((s) => s.stop('SIGTERM', 10_000)));
      const tookMs = performance.now() - started;
      await nats.cleanup();
      for (const [i, status] of statuses.entries()) {
        if (status.code !== 0) throw new Error(`service ${i + 1} exited with ${status.code ?? status.signal}; stderr: ${services[i]?.stderrLines.join('\n')}`);
      }
      if (tookMs > 4_500) throw new Error(`stopping the services took ${Math.round(tookMs)} ms: a call was still open (leaked stream?)`);
    },
  };
}

/** The failure of a call that must fail. */
export async function failure(promise: Promise<unknown>): Promise<CallFailure> {
  try {
    await promise;
  } catch (err) {
    return readCallFailure(err);
  }
  throw new Error('expected the call to fail');
}

/** Promise-returning calls of one client. */
export function rpc(client: CursorServiceClient) {
  return {
    open: (principal = 'user-1', meta: Record<string, string> = {}) => callUnary(client.openSession.bind(client), { principal, meta }),
    get: (sessionId: string, principal = 'user-1') => callUnary(client.getSession.bind(client), { sessionId, principal }),
    touch: (sessionId: string) => callUnary(client.touchSession.bind(client), { sessionId }),
    close: (sessionId: string, from = 'test') => callUnary(client.closeSession.bind(client), { sessionId, from }),
    append: (req: Partial<AppendRequest> & Pick<AppendRequest, 'sessionId' | 'stream'>, deadlineMs?: number) =>
      callUnary(client.append.bind(client), appendRequest(req), deadlineMs === undefined ? {} : { deadlineMs }),
    batch: (entries: AppendRequest[]) => callUnary(client.appendBatch.bind(client), { entries }),
    head: (sessionId: string, stream: string) => callUnary(client.head.bind(client), { sessionId, stream }),
    read: (sessionId: string, stream: string, afterSeq: number, limit: number, afterPos?: number) =>
      callUnary(client.read.bind(client), { sessionId, stream, afterSeq, limit, afterPos }),
  };
}

export function appendRequest(req: Partial<AppendRequest> & Pick<AppendRequest, 'sessionId' | 'stream'>): AppendRequest {
  return { kind: EventKind.EVENT, payload: Buffer.alloc(0), upstreamId: undefined, endReason: 0, traceparent: undefined, expectedSeq: undefined, ...req };
}

/** Every message of a server stream until it ends; rejects with its CallFailure. */
export function collect<T>(stream: ClientReadableStream<T>, max = Infinity): Promise<T[]> {
  return new Promise((resolve, reject) => {
    const out: T[] = [];
    stream.on('data', (m: T) => {
      if (out.length >= max) return;
      out.push(m);
      if (out.length >= max) {
        stream.cancel();
        resolve([...out]);
      }
    });
    stream.on('error', (err) => (out.length >= max ? undefined : reject(Object.assign(readCallFailure(err), { received: out }))));
    stream.on('end', () => resolve(out));
  });
}

/** Resident set size of a process, in bytes (Linux). */
export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb) * 1024;
}

/** A throwaway CA, a server certificate for 127.0.0.1/localhost, and client certificates `cn`s. */
export function makeCertificates(clientNames: readonly string[]): { dir: string; ca: string; server: { cert: string; key: string }; clients: Record<string, { cert: string; key: string }>; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'tether-certs-'));
  const run = (...args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  };
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=tether-test-ca', '-keyout', 'ca.key', '-out', 'ca.pem');
  const issue = (name: string, ext: string): { cert: string; key: string } => {
    run('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`);
    run('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-out', `${name}.pem`, '-extfile', ext);
    return { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
  };
  execFileSync('sh', ['-c', `printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext`], { cwd: dir });
  const server = issue('server', 'server.ext');
  const clients: Record<string, { cert: string; key: string }> = {};
  for (const name of clientNames) {
    execFileSync('sh', ['-c', `printf 'extendedKeyUsage=clientAuth\\n' > ${name}.ext`], { cwd: dir });
    clients[name] = issue(name, `${name}.ext`);
  }
  return { dir, ca: join(dir, 'ca.pem'), server, clients, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
