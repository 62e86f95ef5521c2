import { fileURLToPath } from 'node:url';
import { Metadata, status } from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCursorClient, readCallFailure } from '@tether/cursor-proto';
import { createOperatorClient } from '@tether/cursor-proto/operator';
import { createGateway, openLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { openGrpcOperator, openInspectAccess, openNatsOperator, scanSessions, sessionTag } from '@tether/inspect';
import { principalTag } from '@tether/session-log';
import type { Operator } from '@tether/inspect';
import { startSessionLogService } from '@tether/session-log-service';
import { runAdmin } from '../src/admin-cli.js';
import { startInspectServer } from '../src/inspect-server.js';
import { startMcpUpstream, startNatsServer, startServiceProcess } from '@tether/testing';
import type { McpUpstream, NatsServer, ServiceProcess } from '@tether/testing';
import { callProgress, initialize, readEvents, resume, until } from './admin-stack.js';

/**
 * tether-inspect and tether-admin over a session-log service's operator API
 * (`--log grpc://`), for operators without NATS credentials. One real
 * nats-server, one service process with cursor and operator tokens, one
 * gateway in `--log grpc://` mode. The gRPC operator must answer exactly
 * what the NATS operator reads off the same log, refuse the wrong
 * credentials, name bad input, and keep serving after it.
 */
const SERVICE_MAIN = fileURLToPath(new URL('../../../services/session-log/dist/main.js', import.meta.url));
const CURSOR_TOKEN = 'grpc-operator-cursor-token-0123';
const OPERATOR_TOKEN = 'grpc-operator-operator-token-4567';

let nats: NatsServer;
let service: ServiceProcess;
let upstream: McpUpstream;
let gateway: Gateway;
let url: string;
let overNats: Operator;
let overGrpc: Operator;
let logUrl: string;
/** A session with a same-epoch resume (`resumed`) and a session closed by a refused one (`epoch_mismatch`). */
let resumedTag: string;
let refusedTag: string;

/** Plain JSON: what both operators must agree on (absent fields and `undefined` ones are the same thing). */
const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

beforeAll(async () => {
  nats = await startNatsServer();
  upstream = await startMcpUpstream({ eventStore: true });
  service = await startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--token', `gateway:${CURSOR_TOKEN}`, '--operator-token', `ops:${OPERATOR_TOKEN}`, '--instance-id', 'sl-op'],
    readyLine: (o) => o.msg === 'listening',
  });
  logUrl = `grpc://127.0.0.1:${service.port}`;
  const config = parseConfig(['--port', '0', '--upstream', upstream.url, '--instance-id', 'gw-op', '--heartbeat', '1s', '--log', logUrl, '--log-token', CURSOR_TOKEN], {});
  gateway = createGateway(config, await openLog(config), pino({ level: process.env.TETHER_TEST_LOG ?? 'silent' }));
  url = `http://127.0.0.1:${await gateway.listen()}/mcp`;

  const resumed = await initialize(url);
  const events = await readEvents(await callProgress(url, resumed, 4, 0));
  const replay = await readEvents(await resume(url, resumed, events[1]!.id!));
  expect(replay.map((m) => m.id)).toEqual(events.slice(2).map((m) => m.id));
  const refused = await initialize(url);
  const [, stream, seq, pos] = (await readEvents(await callProgress(url, refused, 2, 0)))[1]!.id!.split('-');
  const answer = await resume(url, refused, `aaaaaaaaaa-${stream}-${seq}-${pos}`);
  await answer.arrayBuffer();
  expect(answer.status).toBe(404);
  resumedTag = sessionTag(resumed);
  refusedTag = sessionTag(refused);

  overNats = await openNatsOperator({ servers: nats.url });
  overGrpc = openGrpcOperator({ url: logUrl, token: OPERATOR_TOKEN });
  // Both sessions' audit events are stored (the refused one's close last).
  await until('both sessions audited', async () => {
    const rows = await overNats.listSessions({});
    const refusedRow = rows.find((r) => r.tag === refusedTag);
    return rows.some((r) => r.tag === resumedTag && r.verdicts['resumed'] === 1) && refusedRow?.verdicts['epoch_mismatch'] === 1 && refusedRow.state === 'closed' ? rows : undefined;
  }, 10_000);
}, 60_000);

afterAll(async () => {
  await overGrpc?.close();
  await overNats?.close();
  await gateway?.close().catch(() => undefined);
  await service?.stop();
  await upstream?.close();
  await nats?.cleanup();
});

describe('the operator API of tether-session-log', () => {
  it('answers the session list, a timeline and the chain checks exactly as the log on NATS reads', async () => {
    for (const filter of [{}, { verdict: 'resumed' }, { verdict: 'epoch_mismatch' }, { state: 'closed' }, { limit: 1 }, { principal: 'A' }, { principal: 'A'.repeat(43) }]) {
      expect(plain(await overGrpc.listSessions(filter)), JSON.stringify(filter)).toEqual(plain(await overNats.listSessions(filter)));
    }
    expect((await overGrpc.listSessions({ verdict: 'resumed' })).map((r) => r.tag)).toEqual([resumedTag]);
    for (const tag of [resumedTag, refusedTag]) {
      const timeline = await overGrpc.readTimeline(tag);
      expect(plain(timeline)).toEqual(plain(await overNats.readTimeline(tag)));
      expect(plain(await overGrpc.checkChains(tag))).toEqual(plain(await overNats.checkChains(tag)));
    }
    const timeline = (await overGrpc.readTimeline(resumedTag))!;
    expect(timeline.lanes.some((l) => l.events.filter((e) => e.kind === 'event').length >= 4)).toBe(true);
    expect(timeline.connections.find((c) => c.kind === 'resume')).toMatchObject({ verdict: 'resumed', instance: 'gw-op' });
    expect((await overGrpc.checkChains(resumedTag)).every((c) => c.ok)).toBe(true);
    // Metadata only, over the wire too: no session id, no payload.
    expect(JSON.stringify(await overGrpc.listSessions({}))).not.toMatch(/"[A-Za-z0-9_-]{22}"/);
  });

  it("carries each session's principal tag (principal_tag), never the digest, and filters by it", async () => {
    const access = await openInspectAccess({ servers: nats.url });
    const records = new Map((await scanSessions(access)).map((s) => [s.tag, s.record]));
    await access.close();
    const digest = records.get(resumedTag)!.principal;
    const principal = principalTag(digest);
    // The service binds sessions to the digest of its caller and the gateway's principal: one digest here.
    expect(digest).toHaveLength(43);
    expect(records.get(refusedTag)!.principal).toBe(digest);
    const rows = await overGrpc.listSessions({});
    expect(rows.map((r) => [r.tag, r.principal])).toEqual(expect.arrayContaining([[resumedTag, principal], [refusedTag, principal]]));
    expect((await overGrpc.readTimeline(resumedTag))!.session.principal).toBe(principal);
    for (const filter of [{ principal }, { principal: principal.slice(0, 4), verdict: 'resumed' }, { principal: digest }, { principal: principal[0] === 'A' ? 'B' : 'A' }]) {
      const listed = await overGrpc.listSessions(filter);
      expect(plain(listed), JSON.stringify(filter)).toEqual(plain(await overNats.listSessions(filter)));
      expect(JSON.stringify(listed)).not.toContain(digest);
    }
    expect((await overGrpc.listSessions({ principal })).map((r) => r.tag).sort()).toEqual([resumedTag, refusedTag].sort());
    expect(await overGrpc.listSessions({ principal: principal[0] === 'A' ? 'B' : 'A' })).toEqual([]);

    // tether-admin and the page over the operator API: the tag shown, the digest nowhere.
    let out = '';
    const code = await runAdmin(['sessions', '--principal', principal, '--log', logUrl, '--log-token', OPERATOR_TOKEN], { stdout: (t) => (out += t), stderr: (t) => (out += t), env: {} });
    expect(code).toBe(0);
    expect(out).toMatch(new RegExp(`^${resumedTag}\\s+${principal}\\s`, 'm'));
    expect(out).not.toContain(digest);
    const page = await startInspectServer({ source: overGrpc, tokens: ['inspector-page-token-0123'], host: '127.0.0.1', port: 0 });
    try {
      for (const path of [`/api/sessions?principal=${principal}`, `/api/sessions/${resumedTag}`]) {
        const res = await fetch(`${page.url}${path}`, { headers: { authorization: 'Bearer inspector-page-token-0123' } });
        expect(res.status, path).toBe(200);
        const text = await res.text();
        expect(text, path).toContain(`"principal":"${principal}"`);
        expect(text, path).not.toContain(digest);
      }
    } finally {
      await page.close();
    }
  });

  it('drives tether-admin with --log grpc:// and its operator token', async () => {
    const run = async (args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> => {
      let out = '';
      let err = '';
      const code = await runAdmin(args, { stdout: (t) => (out += t), stderr: (t) => (err += t), env });
      return { code, out, err };
    };
    const list = await run(['sessions', '--json', '--log', logUrl, '--log-token', OPERATOR_TOKEN]);
    expect(list.code).toBe(0);
    expect((JSON.parse(list.out) as { tag: string }[]).map((r) => r.tag)).toEqual(expect.arrayContaining([resumedTag, refusedTag]));
    const show = await run(['show', resumedTag, '--log', logUrl], { TETHER_OPERATOR_TOKEN: OPERATOR_TOKEN });
    expect(show.code).toBe(0);
    expect(show.out).toContain('resumed');
    expect((await run(['verify', resumedTag, '--log', logUrl, '--log-token', OPERATOR_TOKEN])).code).toBe(0);

    // A cursor token is no operator's: refused, named, exit 1; no token at all is bad input (exit 2).
    const wrong = await run(['sessions', '--json', '--log', logUrl, '--log-token', CURSOR_TOKEN]);
    expect(wrong.code).toBe(1);
    expect(JSON.parse(wrong.out)).toMatchObject({ error: { code: 'unauthenticated' } });
    expect(wrong.err).toMatch(/operator credentials/);
    expect(wrong.err).not.toContain(CURSOR_TOKEN);
    expect((await run(['sessions', '--log', logUrl])).err).toMatch(/needs --log-token/);
    expect((await run(['sessions', '--log', logUrl, '--log-token', OPERATOR_TOKEN, '--namespace', 'x'])).code).toBe(2);
    const unknown = await run(['show', 's_AAAAAAAAAAAA', '--json', '--log', logUrl, '--log-token', OPERATOR_TOKEN]);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.out)).toMatchObject({ error: { code: 'session_not_found' } });
    const drain = await run(['drain', 'no-such-gateway', '--timeout', '300', '--json', '--log', logUrl, '--log-token', OPERATOR_TOKEN]);
    expect(JSON.parse(drain.out)).toMatchObject({ error: { code: 'instance_not_found' } });
  });

  it('serves the inspector page from the operator API', async () => {
    const page = await startInspectServer({ source: overGrpc, tokens: ['inspector-page-token-0123'], host: '127.0.0.1', port: 0 });
    try {
      const res = await fetch(`${page.url}/api/sessions?verdict=epoch_mismatch`, { headers: { authorization: 'Bearer inspector-page-token-0123' } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { sessions: { tag: string }[] }).sessions.map((s) => s.tag)).toEqual([refusedTag]);
      const timeline = await fetch(`${page.url}/api/sessions/${resumedTag}`, { headers: { authorization: 'Bearer inspector-page-token-0123' } });
      expect(timeline.status).toBe(200);
      const missing = await fetch(`${page.url}/api/sessions/s_AAAAAAAAAAAA`, { headers: { authorization: 'Bearer inspector-page-token-0123' } });
      expect(missing.status).toBe(404);
    } finally {
      await page.close();
    }
  });

  it('keeps the two token sets apart, and names bad input without stopping', async () => {
    const target = `127.0.0.1:${service.port}`;
    const unary = <Res>(call: (md: Metadata, cb: (err: unknown, res: Res) => void) => void): Promise<Res> =>
      new Promise((resolve, reject) => call(new Metadata(), (err, res) => (err === null ? resolve(res) : reject(err))));
    const failure = async (p: Promise<unknown>): Promise<{ code: number; detail: string | undefined; message: string }> => {
      try {
        await p;
      } catch (err) {
        const f = readCallFailure(err);
        return { code: f.code, detail: f.detail?.code, message: f.message };
      }
      throw new Error('the call succeeded');
    };
    const withCursorToken = createOperatorClient({ target, token: CURSOR_TOKEN });
    const withoutToken = createOperatorClient({ target });
    const ops = createOperatorClient({ target });
    const cursorWithOperatorToken = createCursorClient({ target, token: OPERATOR_TOKEN });
    try {
      expect(await failure(unary((md, cb) => withCursorToken.listSessions({ limit: 0 }, md, cb)))).toMatchObject({ code: status.UNAUTHENTICATED, detail: 'unauthenticated' });
      expect(await failure(unary((md, cb) => withoutToken.listSessions({ limit: 0 }, md, cb)))).toMatchObject({ code: status.UNAUTHENTICATED });
      expect(await failure(unary((md, cb) => cursorWithOperatorToken.getSession({ sessionId: 'x'.repeat(22), principal: '' }, md, cb)))).toMatchObject({ code: status.UNAUTHENTICATED });

      const auth = (): Metadata => {
        const md = new Metadata();
        md.set('authorization', `Bearer ${OPERATOR_TOKEN}`);
        return md;
      };
      const call = <Res>(f: (md: Metadata, cb: (err: unknown, res: Res) => void) => void): Promise<Res> => new Promise((resolve, reject) => f(auth(), (err, res) => (err === null ? resolve(res) : reject(err))));
      const bad = [
        [() => call((md, cb) => ops.showSession({ tag: 'not-a-tag' }, md, cb)), status.INVALID_ARGUMENT, 'invalid_argument', /not a session tag/],
        [() => call((md, cb) => ops.showSession({ tag: 's_AAAAAAAAAAAA' }, md, cb)), status.NOT_FOUND, 'session_not_found', /no session/],
        [() => call((md, cb) => ops.verifySession({ tag: 'x'.repeat(22) }, md, cb)), status.INVALID_ARGUMENT, 'invalid_argument', /raw session id|not a session tag/],
        [() => call((md, cb) => ops.listSessions({ limit: 20_000 }, md, cb)), status.INVALID_ARGUMENT, 'invalid_argument', /limit 20000/],
        [() => call((md, cb) => ops.listSessions({ limit: 0, verdict: 'a b\n' }, md, cb)), status.INVALID_ARGUMENT, 'invalid_argument', /verdict filter/],
        [() => call((md, cb) => ops.listSessions({ limit: 0, principal: 'eyJhbGciOi.secret' }, md, cb)), status.INVALID_ARGUMENT, 'invalid_argument', /^invalid principal filter; allowed: a principal tag[^.]*$/],
        [() => call((md, cb) => ops.listSessions({ limit: 0, principal: '' }, md, cb)), status.INVALID_ARGUMENT, 'invalid_argument', /invalid principal filter/],
        [() => call((md, cb) => ops.drainInstance({ instance: '../x', timeoutMs: 0 }, md, cb)), status.INVALID_ARGUMENT, 'invalid_argument', /not an instance id/],
        [() => call((md, cb) => ops.drainInstance({ instance: 'gw-none', timeoutMs: 90_000 }, md, cb)), status.INVALID_ARGUMENT, 'invalid_argument', /timeout_ms/],
      ] as const;
      for (const [start, code, detail, message] of bad) {
        const f = await failure(start());
        expect(f).toMatchObject({ code, detail });
        expect(f.message).toMatch(message);
        // Still serving.
        expect((await call<{ sessions: unknown[] }>((md, cb) => ops.listSessions({ limit: 1 }, md, cb))).sessions).toHaveLength(1);
      }
    } finally {
      for (const c of [withCursorToken, withoutToken, ops, cursorWithOperatorToken]) c.close();
    }
  });

  it('is off, and says so, on a service without --operator-token', async () => {
    const bare = await startSessionLogService({ port: 0, nats: nats.url, tokens: [`gateway:${CURSOR_TOKEN}`], logger: pino({ level: 'silent' }) });
    const off = openGrpcOperator({ url: `grpc://${bare.target}`, token: OPERATOR_TOKEN });
    try {
      await expect(off.listSessions({})).rejects.toMatchObject({ code: 'operator_api_off', message: expect.stringMatching(/--operator-token/) });
    } finally {
      await off.close();
      await bare.close();
    }
  });

  it('closes a session on every instance through the operator API', async () => {
    expect(await overGrpc.closeSession(resumedTag)).toEqual({ tag: resumedTag, closed: true });
    const row = await until('the closed state', async () => (await overNats.listSessions({})).find((r) => r.tag === resumedTag && r.state === 'closed'));
    expect(row.streams).toBe(0);
    expect((await overGrpc.readTimeline(resumedTag))!.connections.some((c) => c.kind === 'close' && c.instance === 'tether-admin')).toBe(true);
  });
});
