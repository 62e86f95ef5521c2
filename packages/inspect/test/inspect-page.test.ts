/// <reference lib="dom" />
// page.evaluate callbacks run in the browser: `document` is its.
import { mkdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInspectServer } from '../src/inspect-server.js';
import type { InspectServer } from '../src/inspect-server.js';
import { announceChromium, chromiumMissing, openBrowser } from './browser.js';
import type { OpenBrowser } from './browser.js';
import { createFixtureSource, fixtureTimelines, RAW_IDS, RAW_PRINCIPALS } from './fixture-source.js';

// The page on fixture data in a real browser (the e2e test draws a real stack's session).
announceChromium();
const TOKEN = 'inspect-page-token-0123456789';
const RESULTS = new URL('../../../test-results/', import.meta.url).pathname;
const timelines = fixtureTimelines();
const [a, b] = timelines.map((t) => t.session.tag) as [string, string];
const [alice, bob] = timelines.map((t) => t.session.principal) as [string, string];
let server: InspectServer;
let browser: OpenBrowser;

describe.skipIf(chromiumMissing !== undefined)(`the inspector page in Chromium${chromiumMissing === undefined ? '' : ` (SKIPPED: ${chromiumMissing})`}`, () => {
  beforeAll(async () => {
    server = await startInspectServer({ source: createFixtureSource(timelines), tokens: [TOKEN] });
    browser = await openBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('logs in with ?token= once, then lists sessions by tag with their principal and verdicts and filters them', async () => {
    const { page } = browser;
    await page.goto(`${server.url}/?token=${TOKEN}#/`);
    expect(page.url()).toBe(`${server.url}/#/`);
    await page.waitForSelector('#sessions');
    expect(await page.locator('#sessions tbody tr').count()).toBe(2);
    expect(await page.locator(`tr[data-session="${a}"] .chip[data-verdict="resumed"]`).textContent()).toBe('resumed 1');
    expect(await page.locator(`tr[data-session="${b}"] .chip[data-verdict="epoch_mismatch"]`).textContent()).toBe('epoch_mismatch 1');
    // The principal column: each session's principal tag, second after the session's.
    expect(await page.locator('#sessions thead th').evaluateAll((ths) => ths.map((th) => th.textContent))).toEqual(['Session', 'Principal', 'Route', 'State', 'Age', 'Streams', 'Resume verdicts']);
    expect(await page.locator(`tr[data-session="${a}"] td.principal`).textContent()).toBe(alice);
    expect(await page.locator(`tr[data-session="${b}"] td.principal`).textContent()).toBe(bob);
    await page.selectOption('#verdict-filter', 'epoch_mismatch');
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 1);
    expect(await page.locator('#sessions tbody tr').getAttribute('data-session')).toBe(b);
    await page.selectOption('#verdict-filter', '');
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 2);
    // By principal: typed (its start is enough), or by following a principal tag's link.
    await page.fill('#principal-filter', alice.slice(0, 6));
    await page.press('#principal-filter', 'Enter');
    await page.waitForFunction((tag) => document.body.dataset.ready?.includes('principal=') && [...document.querySelectorAll('#sessions tbody tr')].every((r) => r.getAttribute('data-principal')!.startsWith(tag)), alice.slice(0, 6));
    expect(await page.locator('#sessions tbody tr').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-session')))).toContain(a);
    await page.fill('#principal-filter', 'not.a.tag');
    await page.press('#principal-filter', 'Enter');
    await page.waitForSelector('#principal-error:not(:empty)');
    expect(await page.locator('#principal-error').textContent()).not.toContain('not.a.tag');
    await page.goto(`${server.url}/#/`);
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 2);
    await page.click(`tr[data-session="${b}"] td.principal a`);
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 1);
    expect(await page.locator('#sessions tbody tr').getAttribute('data-session')).toBe(b);
    expect(await page.inputValue('#principal-filter')).toBe(bob);
    await page.fill('#principal-filter', '');
    await page.press('#principal-filter', 'Enter');
    await page.waitForFunction(() => document.querySelectorAll('#sessions tbody tr').length === 2);
  });

  it('draws one session: lanes, marks with kind and size, writers and the takeover, connections with verdicts', async () => {
    const { page } = browser;
    await page.click(`a[href="#/session/${a}"]`);
    await page.waitForSelector('svg.timeline');
    expect(await page.locator('#session-tag').textContent()).toBe(a);
    expect(await page.locator('#session-principal').textContent()).toBe(alice);
    expect(await page.locator('g.lane').evaluateAll((gs) => gs.map((g) => g.getAttribute('data-lane')))).toEqual(['0', '1']);
    expect(await page.locator('g.lane[data-lane="1"] g.mark').count()).toBe(7);
    expect(await page.locator('g.lane[data-lane="1"] g.mark[data-kind="end"]').count()).toBe(1);
    expect(await page.locator('g.lane[data-lane="0"] g.mark[data-kind="prime"]').count()).toBe(1);
    expect(await page.locator('g.lane[data-lane="1"] g.mark[data-seq="3"]').getAttribute('data-bytes')).toBe('240');
    expect(await page.locator('g.lane[data-lane="1"] g.mark[data-seq="3"] title').textContent()).toContain('seq 3 · pos 7 · event · 240 B · writer w-gw1');
    expect(await page.locator('g.lane[data-lane="0"] [data-takeover-by]').textContent()).toBe('takeover → gateway-2');
    expect(await page.locator('g.lane[data-lane="1"] [data-writer-of]').textContent()).toBe('written by gateway-1');
    expect(await page.locator('g.connection[data-verdict="resumed"]').getAttribute('data-instance')).toBe('gateway-2');
    expect(await page.locator('g.connection[data-verdict="malformed"] .conn-verdict-bad').textContent()).toBe('malformed');
    expect(await page.locator('#connections tr[data-verdict="resumed"]').textContent()).toContain('stream 1 · seq 3 · pos 7');
    expect(await page.locator('g.session-end').count()).toBe(0);
    await page.click('#check-chains');
    await page.waitForSelector('#chains');
    expect(await page.locator('#chains tr[data-ok="true"]').count()).toBe(2);
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: `${RESULTS}inspector-fixture.png`, fullPage: true });
  });

  it("shows a closed session's end", async () => {
    const { page } = browser;
    await page.goto(`${server.url}/#/session/${b}`);
    await page.waitForSelector('g.session-end');
    expect(await page.locator('g.session-end text').textContent()).toBe('session closed');
    expect(await page.locator('g.connection[data-verdict="epoch_mismatch"]').count()).toBe(1);
  });

  it('lists tasks by tag with their runner, counts and outcome, and filters them by status and principal', async () => {
    const { page } = browser;
    await page.goto(`${server.url}/#/`);
    await page.waitForSelector('#sessions');
    await page.click('.bar .nav a[href="#/tasks"]');
    await page.waitForSelector('#tasks');
    expect(await page.locator('#tasks thead th').evaluateAll((ths) => ths.map((th) => th.textContent))).toEqual(['Task', 'Status', 'Tool', 'Route', 'Principal', 'Runner', 'Alive', 'Attempts', 'Reruns', 'Rounds', 'Age', 'TTL left', 'Outcome']);
    expect(await page.locator('#tasks tbody tr').evaluateAll((rs) => rs.map((r) => [r.getAttribute('data-task'), r.getAttribute('data-runner')]))).toEqual([
      ['Tk1abc…', 'alive'],
      ['Tk2def…', 'none'],
      ['Tk3ghi…', 'gone'],
    ]);
    expect(await page.locator('tr[data-task="Tk2def…"] td.outcome').textContent()).toBe('error -32603: the upstream answered HTTP 502');
    expect(await page.locator('tr[data-task="Tk2def…"] td.outcome').getAttribute('title')).toBe('record 1000 B · params 120 B · result 0 B · error 80 B');
    expect(await page.locator('tr[data-task="Tk3ghi…"] td.outcome').textContent()).toBe('2 input requests pending');
    expect(await page.locator('tr[data-task="Tk3ghi…"] td.runner').textContent()).toBe('gone');
    await page.selectOption('#status-filter', 'failed');
    await page.waitForFunction(() => document.querySelectorAll('#tasks tbody tr').length === 1);
    expect(await page.locator('#tasks tbody tr').getAttribute('data-task')).toBe('Tk2def…');
    await page.selectOption('#status-filter', '');
    await page.waitForFunction(() => document.querySelectorAll('#tasks tbody tr').length === 3);
    await page.click('tr[data-task="Tk3ghi…"] td.principal a');
    await page.waitForFunction(() => document.querySelectorAll('#tasks tbody tr').length === 1);
    expect(await page.inputValue('#task-principal-filter')).toBe(bob);
    mkdirSync(RESULTS, { recursive: true });
    await page.goto(`${server.url}/#/tasks`);
    await page.waitForFunction(() => document.querySelectorAll('#tasks tbody tr').length === 3);
    await page.screenshot({ path: `${RESULTS}inspector-tasks-fixture.png`, fullPage: true });
  });

  it('loaded nothing from anywhere else, broke no CSP rule, and shows no raw id', async () => {
    const { page, requests, problems } = browser;
    expect(requests.length).toBeGreaterThan(3);
    expect(requests.filter((u) => !u.startsWith(`${server.url}/`))).toEqual([]);
    expect(problems).toEqual([]);
    const html = await page.content();
    for (const id of RAW_IDS) expect(html).not.toContain(id);
    for (const digest of RAW_PRINCIPALS) expect(html).not.toContain(digest);
  });
});
