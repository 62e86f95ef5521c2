import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { createGateway, openLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { startMcpUpstream, startNatsServer, UpstreamTools } from '@tether/testing';
import type { McpUpstream, NatsServer } from '@tether/testing';
import { callTool, initialize, request } from './e2e/raw-client.js';

// Three deployments on one nats-server (one account): the default (no
// namespace, today's names) and two namespaces, each a gateway configured as
// an operator would (`--namespace`, the log opened by openLog from the config).
const NAMESPACES = ['', 'alpha', 'beta'] as const;
type Namespace = (typeof NAMESPACES)[number];
const PRINCIPAL = { authorization: 'Bearer same-principal-everywhere' };

let nats: NatsServer;
let upstream: McpUpstream;
let nc: NatsConnection;
const gateways = new Map<Namespace, { gateway: Gateway; url: string }>();

beforeAll(async () => {
  nats = await startNatsServer();
  upstream = await startMcpUpstream({ eventStore: true });
  nc = await connect({ servers: nats.url });
  // Side by side: each starts while the others are up (today the second one fails with "subjects overlap").
  for (const ns of NAMESPACES) {
    const config = parseConfig(['--port', '0', '--nats', nats.url, '--upstream', upstream.url, '--instance-id', `gw-${ns || 'default'}`, '--heartbeat', '1s', ...(ns === '' ? [] : ['--namespace', ns])], {});
    const gateway = createGateway(config, await openLog(config), pino({ level: process.env.TETHER_TEST_LOG ?? 'silent' }));
    gateways.set(ns, { gateway, url: `http://127.0.0.1:${await gateway.listen()}/mcp` });
  }
});
afterAll(async () => {
  for (const { gateway } of gateways.values()) await gateway.close().catch(() => undefined);
  await nc?.close();
  await upstream?.close();
  await nats?.cleanup();
});

const urlOf = (ns: Namespace): string => gateways.get(ns)!.url;

/** A session in `ns` with one finished tool-call stream; its event ids. */
async function sessionWithEvents(ns: Namespace, count = 3): Promise<{ sessionId: string; ids: string[] }> {
  const sessionId = await initialize(urlOf(ns), PRINCIPAL);
  const post = await request(urlOf(ns), { method: 'POST', sessionId, headers: PRINCIPAL, body: callTool(1, UpstreamTools.StreamProgress, { count, delayMs: 0 }) });
  expect(post.status).toBe(200);
  const ids: string[] = [];
  for await (const m of post.messages) if (m.id !== undefined && m.data !== '') ids.push(m.id);
  expect(ids.length).toBeGreaterThanOrEqual(count);
  return { sessionId, ids };
}

describe('namespaces on one NATS account', () => {
  it('each has its own stream, subjects and buckets; the default keeps today\'s names', async () => {
    const jsm = await jetstreamManager(nc);
    const streams = new Map<string, { subjects: string[]; republish: unknown }>();
    for await (const info of jsm.streams.list()) streams.set(info.config.name, { subjects: info.config.subjects ?? [], republish: info.config.republish });
    expect(streams.get('TETHER_LOG')).toEqual({ subjects: ['tether.log.>', 'tether.audit.>'], republish: { src: 'tether.log.>', dest: 'tether.live.>' } });
    for (const ns of ['alpha', 'beta']) {
      expect(streams.get(`TETHER_LOG_${ns}`)).toEqual({ subjects: [`tether_${ns}.log.>`, `tether_${ns}.audit.>`], republish: { src: `tether_${ns}.log.>`, dest: `tether_${ns}.live.>` } });
    }
    const buckets: string[] = [];
    for await (const status of await new Kvm(nc).list()) buckets.push(status.bucket);
    expect(buckets.sort()).toEqual(
      ['tether_leases', 'tether_principals', 'tether_sessions', ...['alpha', 'beta'].flatMap((ns) => [`tether_leases_${ns}`, `tether_principals_${ns}`, `tether_sessions_${ns}`])].sort(),
    );
    // The durable tasks (2026-07-28) are a stream of each namespace too, with their own subjects and republish.
    for (const [ns, root] of [['', 'tether'], ['alpha', 'tether_alpha'], ['beta', 'tether_beta']] as const) {
      expect(streams.get(ns === '' ? 'TETHER_EDGE_TASKS' : `TETHER_EDGE_TASKS_${ns}`)).toEqual({ subjects: [`${root}.edge.task.>`], republish: { src: `${root}.edge.task.>`, dest: `${root}.edge.live.>` } });
    }
    // And each task's recorded notifications (tasks/stream), one stream per namespace.
    for (const [ns, root] of [['', 'tether'], ['alpha', 'tether_alpha'], ['beta', 'tether_beta']] as const) {
      expect(streams.get(ns === '' ? 'TETHER_EDGE_TASKS_EVENTS' : `TETHER_EDGE_TASKS_${ns}_EVENTS`)?.subjects).toEqual([`${root}.edge.event.>`]);
    }
    const taskStreams = ['', '_alpha', '_beta'].flatMap((suffix) => [`TETHER_EDGE_TASKS${suffix}`, `TETHER_EDGE_TASKS${suffix}_EVENTS`]);
    expect([...streams.keys()].sort()).toEqual(['TETHER_LOG', 'TETHER_LOG_alpha', 'TETHER_LOG_beta', ...taskStreams, ...buckets.map((b) => `KV_${b}`)].sort());
  });

  it('a session of one namespace is unknown (404) in every other, even with the right principal', async () => {
    const { sessionId, ids } = await sessionWithEvents('alpha');
    // Known where it was made.
    const home = await request(urlOf('alpha'), { method: 'POST', sessionId, headers: PRINCIPAL, body: callTool(2, UpstreamTools.Echo, { text: 'x' }) });
    expect(home.status).toBe(200);
    await home.json().catch(() => undefined);
    for (const ns of ['beta', ''] as const) {
      const post = await request(urlOf(ns), { method: 'POST', sessionId, headers: PRINCIPAL, body: callTool(3, UpstreamTools.Echo, { text: 'x' }) });
      expect(post.status).toBe(404);
      const get = await request(urlOf(ns), { method: 'GET', sessionId, headers: PRINCIPAL });
      expect(get.status).toBe(404);
      // Its own cursor, with its own session id: still an unknown session, never a resume.
      const resume = await request(urlOf(ns), { method: 'GET', sessionId, headers: PRINCIPAL, lastEventId: ids[0]! });
      expect(resume.status).toBe(404);
      expect(resume.headers.get('tether-resume')).not.toBe('resumed');
      const del = await request(urlOf(ns), { method: 'DELETE', sessionId, headers: PRINCIPAL });
      expect(del.status).toBe(404);
    }
    // Nothing another namespace did touched it.
    const again = await request(urlOf('alpha'), { method: 'GET', sessionId, headers: PRINCIPAL, lastEventId: ids[0]! });
    expect(again.status).toBe(200);
    expect(again.headers.get('tether-resume')).toBe('resumed');
    again.cancel();
  });

  it('a cursor of one namespace is refused by another, on a session of its own', async () => {
    const alpha = await sessionWithEvents('alpha');
    const beta = await sessionWithEvents('beta');
    const res = await request(urlOf('beta'), { method: 'GET', sessionId: beta.sessionId, headers: PRINCIPAL, lastEventId: alpha.ids[1]! });
    expect(res.status).toBe(404);
    expect(res.headers.get('tether-resume')).toBe('epoch_mismatch');
    // The alpha session is untouched by the refusal in beta.
    const ok = await request(urlOf('alpha'), { method: 'GET', sessionId: alpha.sessionId, headers: PRINCIPAL, lastEventId: alpha.ids[1]! });
    expect(ok.headers.get('tether-resume')).toBe('resumed');
    ok.cancel();
  });

  it('every subject a namespace publishes on or listens to carries it: log, live, control, writer presence, audit, admin, task cancels', async () => {
    // What the gateways listen to: control and writer presence, per namespace root
    const res = await fetch(`http://127.0.0.1:${nats.monitorPort}/connz?subs=detail`);
    const connz = (await res.json()) as { connections: { subscriptions_list_detail?: { subject: string }[] }[] };
    const subs = connz.connections.flatMap((c) => (c.subscriptions_list_detail ?? []).map((s) => s.subject)).filter((s) => !s.startsWith('_INBOX.'));
    for (const root of ['tether', 'tether_alpha', 'tether_beta']) {
      expect(subs).toContain(`${root}.ctl.*`);
      expect(subs.some((s) => s.startsWith(`${root}.writer.`))).toBe(true);
      expect(subs.some((s) => s.startsWith(`${root}.admin.`))).toBe(true);
      expect(subs.some((s) => s.startsWith(`${root}.edge.cancel.`))).toBe(true);
    }
    // (and the live tail of a reader still open, if any: live subjects are per namespace too)
    expect(subs.filter((s) => !/^(tether|tether_alpha|tether_beta)\.(ctl|writer|live|admin|edge\.cancel)\./.test(s))).toEqual([]);

    // What traffic in alpha puts on the wire: nothing outside alpha's names.
    const seen: string[] = [];
    const sniffer = await connect({ servers: nats.url });
    sniffer.subscribe('>', { callback: (_err, msg) => void seen.push(msg.subject) });
    await sniffer.flush();
    const { sessionId, ids } = await sessionWithEvents('alpha', 5);
    const resumed = await request(urlOf('alpha'), { method: 'GET', sessionId, headers: PRINCIPAL, lastEventId: ids[0]! });
    for await (const _ of resumed.messages) void _;
    const del = await request(urlOf('alpha'), { method: 'DELETE', sessionId, headers: PRINCIPAL });
    expect(del.status).toBeLessThan(300);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await sniffer.close();

    // Replies, and the account's own API audit advisory (its subject names no stream), aside.
    const app = seen.filter((s) => !s.startsWith('_INBOX.') && s !== '$JS.API.INFO' && s !== '$JS.EVENT.ADVISORY.API');
    const roots = new Set(app.filter((s) => s.startsWith('tether')).map((s) => s.split('.').slice(0, 2).join('.')));
    expect([...roots].sort()).toEqual(['tether_alpha.audit', 'tether_alpha.ctl', 'tether_alpha.live', 'tether_alpha.log']);
    // JetStream and KV traffic ($JS.API.…, $KV.…, $JS.ACK.…) names alpha's stream or buckets, never another's.
    const foreign = app.filter((s) => !s.startsWith('tether_alpha.') && !/(^|[._])(TETHER_LOG_alpha|tether_(sessions|leases|principals)_alpha)(\.|$)/.test(s));
    expect(foreign).toEqual([]);
    expect(app.some((s) => s.startsWith('$KV.tether_sessions_alpha.'))).toBe(true);
  });
});
