import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { isTaskId } from '@tether/session-log';
import { ownedKey, ownedRecord, replicaDigest, replicaUrl } from '../src/tasks/owned-record.js';
import { offersTasks, resultOf } from '../src/tasks/task-owners.js';
import { refusedConnection } from '../src/tasks/upstream-owned.js';
import { UpstreamError } from '../src/upstream.js';
import { bodyWithoutTasksDeclaration, declaresTasks, withoutTasksDeclaration } from '../src/tasks/wire.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const CAPS = 'io.modelcontextprotocol/clientCapabilities';

describe('route records of upstream-owned tasks', () => {
  it('key any upstream id by a task-id-shaped digest, apart per route', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (route, id) => {
        const key = ownedKey(route, id);
        expect(isTaskId(key)).toBe(true);
        expect(ownedKey(route, id)).toBe(key);
        expect(ownedKey(`${route}x`, id)).not.toBe(key);
      }),
    );
  });

  it('name the replica by digest, and find it only while the route has it', () => {
    const route = { path: '/mcp', upstreams: ['http://a/mcp?key=secret', 'http://b/mcp'] };
    const record = ownedRecord({ route, replicaUrl: route.upstreams[0]!, principal: 'p', created: { taskId: 'u-1', ttlMs: null, pollIntervalMs: 500 }, maxTtlMs: 60_000, tool: 't' });
    expect(JSON.stringify(record)).not.toContain('secret');
    expect(record).toMatchObject({ taskId: ownedKey('/mcp', 'u-1'), ttlMs: 60_000, pollIntervalMs: 500, upstream: { taskId: 'u-1', replica: replicaDigest(route.upstreams[0]!) } });
    expect(replicaUrl(route, record.upstream!.replica)).toBe(route.upstreams[0]);
    expect(replicaUrl({ path: '/mcp', upstreams: ['http://b/mcp'] }, record.upstream!.replica)).toBeUndefined();
  });

  it('keep the upstream TTL when it is shorter than --task-ttl', () => {
    const route = { path: '/mcp', upstreams: ['http://a/mcp'] };
    expect(ownedRecord({ route, replicaUrl: 'http://a/mcp', principal: 'p', created: { taskId: 'x', ttlMs: 5_000 }, maxTtlMs: 60_000, tool: 't' }).ttlMs).toBe(5_000);
  });
});

describe('the extension declaration', () => {
  const declared = { name: 't', _meta: { [CAPS]: { elicitation: {}, extensions: { [TASKS]: {}, other: { a: 1 } } }, keep: 1 } };

  it('is removed alone: other capabilities and extensions stay', () => {
    const out = withoutTasksDeclaration(declared);
    expect(declaresTasks(out)).toBe(false);
    expect(out).toEqual({ name: 't', _meta: { [CAPS]: { elicitation: {}, extensions: { other: { a: 1 } } }, keep: 1 } });
    expect(declaresTasks(declared)).toBe(true);
  });

  it('leaves a body that declares nothing byte for byte', () => {
    const body = Buffer.from('{ "jsonrpc":"2.0", "id":1, "method":"tools/call", "params":{"name":"t"} }');
    expect(bodyWithoutTasksDeclaration(body)).toBe(body);
    const stripped = JSON.parse(bodyWithoutTasksDeclaration(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: declared }))).toString());
    expect(declaresTasks(stripped.params)).toBe(false);
  });
});

describe('server/discover answers', () => {
  it('offer the extension when capabilities.extensions names it, in JSON or in an event stream', () => {
    const result = { capabilities: { extensions: { [TASKS]: {} } } };
    const json = JSON.stringify({ jsonrpc: '2.0', id: 1, result });
    expect(offersTasks(objectOf(resultOf(json, false)))).toBe(true);
    expect(offersTasks(objectOf(resultOf(`event: message\ndata: ${json}\n\n`, true)))).toBe(true);
    expect(offersTasks({ tasks: {}, extensions: {} })).toBe(false);
    expect(resultOf('not json', false)).toBeUndefined();
  });
});

describe('a gone replica', () => {
  it('is a refused connection (or no such host), not any failure', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    expect(refusedConnection(new UpstreamError('upstream did not answer', { cause: refused }))).toBe(true);
    expect(refusedConnection(Object.assign(new Error('reset'), { code: 'ECONNRESET' }))).toBe(false);
    expect(refusedConnection(new Error('timeout'))).toBe(false);
  });
});

function objectOf(result: unknown): unknown {
  return (result as { capabilities?: unknown } | undefined)?.capabilities;
}
