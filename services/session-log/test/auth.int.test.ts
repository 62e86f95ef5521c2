import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials, loadPackageDefinition, Metadata, status } from '@grpc/grpc-js';
import type { Client, ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { callUnary, readCallFailure } from '@tether/cursor-proto';
import { protoPath as healthProtoPath } from 'grpc-health-check';
import { failure, makeCertificates, rpc, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

let fx: ServiceFixture;
let plain: string;
let tls: string;
let mtls: string;
let certs: ReturnType<typeof makeCertificates>;
beforeAll(async () => {
  certs = makeCertificates(['gateway-a', 'gateway-b']);
  fx = await startServiceFixture();
  plain = (await fx.start()).target;
  tls = (await fx.start(['--tls-cert', certs.server.cert, '--tls-key', certs.server.key], 'session-log-tls')).target;
  // mTLS only: no tokens, the certificate is the caller.
  mtls = (
    await fx.start(['--tls-cert', certs.server.cert, '--tls-key', certs.server.key, '--tls-client-ca', certs.ca, '--token-file', '/dev/null'], 'session-log-mtls')
  ).target;
});
afterAll(async () => {
  await fx.teardown();
  certs.cleanup();
});

const fs = await import('node:fs');
const pem = (path: string): string => fs.readFileSync(path, 'utf8');

/** A dynamic client of a service whose .proto ships with a package. */
function dynamicClient(protoFile: string, service: string, target: string): Client & Record<string, (...args: unknown[]) => unknown> {
  const definition = loadPackageDefinition(loadSync(protoFile, { keepCase: false, longs: Number, enums: String, defaults: true }));
  const ctor = service.split('.').reduce<unknown>((o, key) => (o as Record<string, unknown>)[key], definition) as ServiceClientConstructor;
  return new ctor(target, credentials.createInsecure()) as unknown as Client & Record<string, (...args: unknown[]) => unknown>;
}

describe('authentication', () => {
  it('a missing, wrong or malformed token is UNAUTHENTICATED with code unauthenticated; a right one works', async () => {
    for (const token of [undefined, 'wrong-token-0123456789', 'x']) {
      const client = fx.client({ target: plain, ...(token === undefined ? { token: undefined } : { token }) });
      const f = await failure(rpc(client).open());
      expect([f.code, f.detail?.code]).toEqual([status.UNAUTHENTICATED, 'unauthenticated']);
    }
    const basic = fx.client({ target: plain, token: undefined });
    const md = new Metadata();
    md.set('authorization', `Basic ${Buffer.from('alice:x').toString('base64')}`);
    const f = await failure(callUnary(basic.openSession.bind(basic), { principal: '', meta: {} }, { metadata: md }));
    expect(f.code).toBe(status.UNAUTHENTICATED);
    // Streams are refused before the handler runs, too.
    const stream = fx.client({ target: plain, token: 'nope-nope-nope-nope' }).resume({ sessionId: 'CCCCCCCCCCCCCCCCCCCCCC', lastEventId: 'x', principal: '' });
    const streamFailure = await new Promise((resolve) => stream.on('error', (err) => resolve(readCallFailure(err))));
    expect(streamFailure).toMatchObject({ code: status.UNAUTHENTICATED });
    expect((await rpc(fx.client({ target: plain })).open()).session?.sessionId).toHaveLength(22);
  });

  it('the health service answers without credentials (probes); reflection lists and describes the API with them', async () => {
    const health = dynamicClient(healthProtoPath, 'grpc.health.v1.Health', plain);
    const check = (service: string) =>
      new Promise<unknown>((resolve, reject) => (health['check'] as (r: unknown, cb: (e: unknown, v: unknown) => void) => void).call(health, { service }, (e, v) => (e ? reject(e) : resolve(v))));
    expect(await check('')).toEqual({ status: 'SERVING' });
    expect(await check('tether.cursor.v1.CursorService')).toEqual({ status: 'SERVING' });
    health.close();

    const reflectionProto = join(dirname(createRequire(import.meta.url).resolve('@grpc/reflection')), '../proto/grpc/reflection/v1/reflection.proto');
    const ask = (token: string | undefined, request: Record<string, unknown>) => {
      const reflection = dynamicClient(reflectionProto, 'grpc.reflection.v1.ServerReflection', plain);
      const md = new Metadata();
      if (token !== undefined) md.set('authorization', `Bearer ${token}`);
      const call = (reflection['serverReflectionInfo'] as (m: Metadata) => NodeJS.ReadWriteStream & { end(): void; write(v: unknown): boolean }).call(reflection, md);
      return new Promise<Record<string, any>>((resolve, reject) => {
        call.on('data', (v: Record<string, any>) => resolve(v));
        call.on('error', (e: unknown) => reject(e));
        call.write(request);
        call.end();
      }).finally(() => reflection.close());
    };
    const listed = await ask(TOKENS.alice, { listServices: '*' });
    expect(listed['listServicesResponse'].service.map((s: { name: string }) => s.name)).toEqual(expect.arrayContaining(['tether.cursor.v1.CursorService', 'grpc.health.v1.Health']));
    const described = await ask(TOKENS.alice, { fileContainingSymbol: 'tether.cursor.v1.CursorService' });
    const files: Buffer[] = described['fileDescriptorResponse'].fileDescriptorProto;
    expect(Buffer.concat(files).toString('latin1')).toContain('ResumeAck');
    await expect(ask(undefined, { listServices: '*' })).rejects.toMatchObject({ code: status.UNAUTHENTICATED });
  });

  it('TLS: a client that trusts the CA works; a plaintext client cannot connect', async () => {
    const secure = fx.client({ target: tls, tls: { ca: pem(certs.ca) } });
    expect((await rpc(secure).open()).session?.sessionId).toHaveLength(22);
    const plaintext = fx.client({ target: tls });
    expect((await failure(callUnary(plaintext.openSession.bind(plaintext), { principal: '', meta: {} }, { deadlineMs: 2_000 }))).code).toBeOneOf([status.UNAVAILABLE, status.DEADLINE_EXCEEDED]);
  });

  it('mTLS: the certificate is the caller; no certificate cannot connect, and callers are isolated by certificate', async () => {
    const client = (name: 'gateway-a' | 'gateway-b') =>
      fx.client({ target: mtls, token: undefined, tls: { ca: pem(certs.ca), cert: pem(certs.clients[name]!.cert), key: pem(certs.clients[name]!.key) } });
    const a = rpc(client('gateway-a'));
    const b = rpc(client('gateway-b'));
    const { session } = await a.open('user-1');
    expect((await a.get(session!.sessionId, 'user-1')).session?.sessionId).toBe(session!.sessionId);
    expect((await failure(b.get(session!.sessionId, 'user-1'))).code).toBe(status.NOT_FOUND);
    const anonymous = fx.client({ target: mtls, token: undefined, tls: { ca: pem(certs.ca) } });
    expect((await failure(callUnary(anonymous.openSession.bind(anonymous), { principal: '', meta: {} }, { deadlineMs: 2_000 }))).code).toBeOneOf([status.UNAVAILABLE, status.DEADLINE_EXCEEDED]);
  });
});
