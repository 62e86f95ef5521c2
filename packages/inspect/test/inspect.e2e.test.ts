/// <reference lib="dom" />
// page.evaluate callbacks run in the browser: `document` is its.
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SseMessage } from '@tether/protocol';
import { startServiceProcess, UpstreamTools } from '@tether/testing';
import type { ServiceProcess } from '@tether/testing';
import { callTool, initialize, request } from '../../../services/gateway/test/e2e/raw-client.js';
import { startStack } from '../../../services/gateway/test/e2e/stack.js';
import type { Stack } from '../../../services/gateway/test/e2e/stack.js';
import type { SessionTimeline } from '../src/model.js';
import { sessionTag } from '../src/tag.js';
import { announceChromium, chromiumMissing, openBrowser } from './browser.js';
import type { OpenBrowser } from './browser.js';

/**
 * The inspector on a real stack: nats-server, an SDK upstream, two gateway
 * processes, and tether-inspect as its own process, drawn in Chromium.
 * Session A streams on gateway-1, resumes its POST stream and its GET
 * stream on gateway-2 (cross-instance; the GET stream changes writer), and
 * sends one malformed cursor (refused, 400; the session lives). Session B
 * is refused with a cursor of A (epoch_mismatch: the gateway closes it).
 */
announceChromium();
const INSPECT_MAIN = fileURLToPath(new URL('../dist/inspect-main.js', import.meta.url));
const RESULTS = new URL('../../../test-results/', import.meta.url).pathname;
const TOKEN = 'inspect-e2e-token-0123456789';
let stack: Stack;
let inspect: ServiceProcess;
let browser: OpenBrowser;
let url: string;
const ids = { a: '', b: '' };
/** Session A as the API answered it: the page must draw the same lanes. */
let timelineA: SessionTimeline;

async function take(messages: AsyncGenerator<SseMessage>, count: number): Promise<SseMessage[]> {
  const out: SseMessage[] = [];
  if (count === 0) return out;
  for await (const m of messages) {
    if (m.data !== '' && m.event !== 'resume') out.push(m);
    if (out.length >= count) break;
  }
  return out;
}

async function makeSessions(): Promise<void> {
  const [gw1, gw2] = stack.gateways as [Stack['gateways'][number], Stack['gateways'][number]];
  ids.a = await initialize(gw1.url);
  // Stream 0: the first GET makes gateway-1 its listener and writer: three logging messages.
  const get1 = await request(gw1.url, { method: 'GET', sessionId: ids.a });
  expect(get1.status).toBe(200);
  const notify1 = await request(gw1.url, { method: 'POST', sessionId: ids.a, body: callTool(2, UpstreamTools.NotifyStandalone, { count: 3, delayMs: 10 }) });
  expect(await take(get1.messages, 3)).toHaveLength(3);
  await take(notify1.messages, 1);
  // A POST stream on gateway-1, read to its end, then resumed across instances on gateway-2.
  const post = await request(gw1.url, { method: 'POST', sessionId: ids.a, body: callTool(3, UpstreamTools.StreamProgress, { count: 6, delayMs: 0 }) });
  const posted = (await take(post.messages, 7)).map((m) => m.id!);
  const resumed = await request(gw2.url, { method: 'GET', sessionId: ids.a, lastEventId: posted[2]! });
  expect(resumed.status).toBe(200);
  expect(resumed.headers.get('tether-resume')).toBe('resumed');
  expect((await take(resumed.messages, 4)).map((m) => m.id)).toEqual(posted.slice(3));
  resumed.cancel();
  // Refused, and the session lives: a cursor that does not decode.
  const malformed = await request(gw2.url, { method: 'GET', sessionId: ids.a, lastEventId: 'not-an-event-id' });
  expect(malformed.status).toBe(400);
  expect(malformed.headers.get('tether-resume')).toBe('malformed');
  await malformed.json().catch(() => undefined);
  // Session B, refused for a cursor of session A: epoch_mismatch, and the gateway closes it.
  ids.b = await initialize(gw2.url);
  const refused = await request(gw1.url, { method: 'GET', sessionId: ids.b, lastEventId: posted[1]! });
  expect(refused.status).toBe(404);
  expect(refused.headers.get('tether-resume')).toBe('epoch_mismatch');
  await refused.json().catch(() => undefined);
  // Gateway-1 recorded B's refusal and close with core publishes; it is SIGKILLed below, and what its
  // connection had not flushed by then would be lost with it (seen once under load): wait until they are stored.
  await waitForTimeline(sessionTag(ids.b), (t) => t.connections.some((c) => c.verdict === 'epoch_mismatch') && t.endedAtMs !== undefined);
  // A GET on gateway-2 supersedes gateway-1's delivery of stream 0 and reads what gateway-1 records; then
  // gateway-1 dies, and gateway-2 takes stream 0 over for that reader: a new writer, primed on the stream.
  const reader = await request(gw2.url, { method: 'GET', sessionId: ids.a });
  expect(reader.status).toBe(200);
  await reader.messages.next();
  const tookOver = gw2.process.waitForLine((line) => line['component'] === 'listener' && line['msg'] === 'holding the upstream GET stream', { timeoutMs: 30_000 });
  await gw1.process.kill();
  await tookOver;
  reader.cancel();
  get1.cancel();
}

/** Audit events are published without waiting for an ack: poll until the inspector sees them all. */
async function waitForTimeline(tag: string, ready: (t: SessionTimeline) => boolean): Promise<SessionTimeline> {
  const until = Date.now() + 15_000;
  let last: unknown;
  for (;;) {
    const res = await fetch(`${url}/api/sessions/${tag}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    last = res.status === 200 ? await res.json() : res.status;
    if (res.status === 200 && ready(last as SessionTimeline)) return last as SessionTimeline;
    if (Date.now() > until) throw new Error(`the inspector never showed ${tag} complete; last answer: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe.skipIf(chromiumMissing !== undefined)(`tether-inspect on a real stack, in Chromium${chromiumMissing === undefined ? '' : ` (SKIPPED: ${chromiumMissing})`}`, () => {
  beforeAll(async () => {
    stack = await startStack({ gateways: 2, log: 'nats' });
    inspect = await startServiceProcess({
      name: 'tether-inspect',
      command: process.execPath,
      args: [INSPECT_MAIN, '--nats', stack.nats.url, '--namespace', stack.namespace, '--port', '0', '--token', TOKEN],
      readyLine: (json) => json.msg === 'listening',
    });
    url = `http://127.0.0.1:${inspect.port}`;
    await makeSessions();
    browser = await openBrowser();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await inspect?.stop('SIGTERM' as NodeJS.Signals, 5_000).catch(() => undefined);
    await stack?.teardown();
  });

  it('the API has both sessions, by tag, with every connection the gateways recorded', async () => {
    const a = await waitForTimeline(sessionTag(ids.a), (t) => ['resumed', 'malformed'].every((v) => t.connections.some((c) => c.verdict === v)) && t.connections.some((c) => c.kind === 'takeover'));
    timelineA = a;
    mkdirSync(RESULTS, { recursive: true });
    writeFileSync(`${RESULTS}inspector-timeline.json`, `${JSON.stringify(a, null, 2)}\n`);
    // Stream 0 and a POST stream per call that answered with SSE (two notify calls, the progress call).
    expect(a.lanes[0]!.stream).toBe('0');
    expect(a.lanes.length).toBeGreaterThanOrEqual(4);
    expect(a.connections.filter((c) => c.verdict === 'resumed').map((c) => c.instance)).toEqual(['gateway-2']);
    expect(a.connections.find((c) => c.kind === 'takeover')).toMatchObject({ instance: 'gateway-2', stream: '0' });
    expect(a.lanes[0]!.writers.map((w) => w.takeover)).toEqual([false, true]);
    const b = await waitForTimeline(sessionTag(ids.b), (t) => t.connections.some((c) => c.verdict === 'epoch_mismatch') && t.endedAtMs !== undefined);
    expect(b.session.state).toBe('closed');
  });

  it('draws the session list and filters it by verdict', async () => {
    const { page } = browser;
    await page.goto(`${url}/?token=${TOKEN}`);
    await page.waitForSelector('#sessions');
    const [a, b] = [sessionTag(ids.a), sessionTag(ids.b)];
    expect(await page.locator(`tr[data-session="${a}"] .chip[data-verdict="resumed"]`).textContent()).toBe('resumed 1');
    expect(await page.locator(`tr[data-session="${a}"] .chip[data-verdict="malformed"]`).textContent()).toBe('malformed 1');
    expect(await page.locator(`tr[data-session="${b}"] .chip[data-verdict="epoch_mismatch"]`).textContent()).toBe('epoch_mismatch 1');
    await page.selectOption('#verdict-filter', 'epoch_mismatch');
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 1);
    expect(await page.locator('#sessions tbody tr').getAttribute('data-session')).toBe(b);
    await page.selectOption('#verdict-filter', '');
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 2);
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: `${RESULTS}inspector-sessions.png` });
  });

  it('draws session A: its lanes, marks, writers, the cross-instance resumes and the refused one', async () => {
    const { page } = browser;
    const a = sessionTag(ids.a);
    await page.click(`a[href="#/session/${a}"]`);
    await page.waitForSelector('svg.timeline');
    expect(await page.locator('#session-tag').textContent()).toBe(a);
    const lanes = await page.locator('g.lane').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-lane')));
    expect(lanes).toEqual(timelineA.lanes.map((l) => l.stream));
    expect(lanes[0]).toBe('0');
    // The progress call's stream: the one resumed on gateway-2 with a cursor on a POST stream.
    const cursor = timelineA.connections.find((c) => c.verdict === 'resumed' && c.cursor !== undefined && c.cursor.stream !== '0')!.cursor!;
    const post = cursor.stream;
    expect(lanes).toContain(post);
    // Stream 0: three logging messages written by gateway-1, then gateway-2's prime; the POST stream: 6 progress and the result, ended.
    expect(await page.locator('g.lane[data-lane="0"] g.mark[data-kind="event"]').count()).toBe(3);
    expect(await page.locator('g.lane[data-lane="0"] [data-writer-of]').textContent()).toBe('written by gateway-1');
    expect(await page.locator(`g.lane[data-lane="${post}"] g.mark[data-kind="event"]`).count()).toBeGreaterThanOrEqual(7);
    expect(await page.locator(`g.lane[data-lane="${post}"]`).getAttribute('data-ended')).toBe('true');
    // Each mark carries its event's size, as the read model has it.
    const sizes = await page.locator(`g.lane[data-lane="${post}"] g.mark`).evaluateAll((ms) => ms.map((m) => Number(m.getAttribute('data-bytes'))));
    expect(sizes).toEqual(timelineA.lanes.find((l) => l.stream === post)!.events.map((e) => e.bytes));
    expect(Math.max(...sizes)).toBeGreaterThan(50);
    expect(await page.locator(`g.lane[data-lane="${post}"] [data-writer-of]`).first().textContent()).toBe('written by gateway-1');
    expect(await page.locator('g.lane[data-lane="0"] [data-takeover-by]').textContent()).toBe('takeover → gateway-2');
    const resumes = await page.locator('g.connection[data-kind="resume"]').evaluateAll((gs) => gs.map((g) => `${g.getAttribute('data-verdict')}@${g.getAttribute('data-instance')}`));
    expect(resumes).toEqual(['resumed@gateway-2', 'malformed@gateway-2']);
    expect(await page.locator('g.connection[data-kind="takeover"]').getAttribute('data-instance')).toBe('gateway-2');
    expect(await page.locator('g.connection[data-verdict="malformed"] .conn-verdict-bad').textContent()).toBe('malformed');
    expect(await page.locator(`#connections tr[data-verdict="resumed"]`).first().textContent()).toContain(`stream ${post} · seq ${cursor.seq} · pos ${cursor.pos}`);
    await page.click('#check-chains');
    await page.waitForSelector('#chains');
    expect(await page.locator('#chains tbody tr').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-chain')))).toEqual(timelineA.lanes.map((l) => l.stream));
    expect(await page.locator('#chains tr[data-ok="true"]').count()).toBe(timelineA.lanes.length);
    await page.screenshot({ path: `${RESULTS}inspector.png`, fullPage: true });
  });

  it("draws session B's refusal and its end", async () => {
    const { page } = browser;
    await page.goto(`${url}/#/session/${sessionTag(ids.b)}`);
    await page.waitForSelector('g.session-end');
    expect(await page.locator('g.connection[data-verdict="epoch_mismatch"]').getAttribute('data-instance')).toBe('gateway-1');
    expect(await page.locator('g.session-end text').textContent()).toBe('session closed');
  });

  it('loaded nothing from elsewhere, broke no CSP rule, and never showed a raw session id', async () => {
    const { page, requests, problems } = browser;
    expect(requests.filter((u) => !u.startsWith(`${url}/`))).toEqual([]);
    expect(problems).toEqual([]);
    for (const hash of ['#/', `#/session/${sessionTag(ids.a)}`]) {
      await page.goto(`${url}/${hash}`);
      await page.waitForFunction((h) => document.body.dataset.ready === h.replace(/^#/, ''), hash);
      const html = await page.content();
      expect(html).not.toContain(ids.a);
      expect(html).not.toContain(ids.b);
    }
    for (const path of ['/api/sessions', `/api/sessions/${sessionTag(ids.a)}`, `/api/sessions/${sessionTag(ids.b)}`, `/api/sessions/${sessionTag(ids.a)}/chains`]) {
      const text = await (await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
      expect(text).not.toContain(ids.a);
      expect(text).not.toContain(ids.b);
    }
    expect((await fetch(`${url}/api/sessions`)).status).toBe(401);
  });
});
