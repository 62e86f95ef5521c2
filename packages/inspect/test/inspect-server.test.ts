import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTENT_SECURITY_POLICY, startInspectServer } from '../src/inspect-server.js';
import type { InspectServer } from '../src/inspect-server.js';
import { principalTag } from '@tether/session-log';
import { createFixtureSource, fixtureTasks, fixtureTimelines, RAW_IDS, RAW_PRINCIPALS } from './fixture-source.js';
import type { TaskList } from '../src/task-model.js';

const TOKEN = 'inspect-test-token-0123456789';
const timelines = fixtureTimelines();
const source = createFixtureSource(timelines);
const [a, b] = timelines.map((t) => t.session.tag) as [string, string];
let server: InspectServer;

beforeAll(async () => {
  server = await startInspectServer({ source, tokens: ['another-accepted-token-xyz', TOKEN] });
});
afterAll(async () => {
  await server?.close();
});

const get = (path: string, headers: Record<string, string> = {}): Promise<Response> => fetch(`${server.url}${path}`, { headers, redirect: 'manual' });
const bearer = { authorization: `Bearer ${TOKEN}` };

async function login(): Promise<string> {
  const res = await get(`/?token=${encodeURIComponent(TOKEN)}`);
  expect(res.status).toBe(303);
  const cookie = res.headers.get('set-cookie')!;
  return cookie.split(';')[0]!;
}

describe('access', () => {
  it('refuses the page and the API without a token, or with a wrong one: 401', async () => {
    for (const path of ['/', '/api/sessions', `/api/sessions/${a}`, `/api/sessions/${a}/chains`, '/api/tasks']) {
      expect((await get(path)).status, path).toBe(401);
      expect((await get(path, { authorization: 'Bearer wrong-token-wrong-token' })).status, path).toBe(401);
      expect((await get(path, { authorization: `Bearer ${TOKEN}x` })).status, path).toBe(401);
      expect((await get(path, { authorization: TOKEN })).status, path).toBe(401);
      expect((await get(path, { cookie: 'tether_inspect=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' })).status, path).toBe(401);
    }
    const wrong = await get('/?token=not-the-token-at-all');
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect(await wrong.text()).toContain('Token needed');
    const api = await get('/api/sessions');
    expect(api.headers.get('www-authenticate')).toBe('Bearer realm="tether-inspect"');
    expect(await api.json()).toEqual({ error: { code: 'unauthorized', message: expect.any(String) } });
  });

  it('takes the bearer token on the API (any of the configured ones)', async () => {
    expect((await get('/api/sessions', bearer)).status).toBe(200);
    expect((await get('/api/sessions', { authorization: 'bearer another-accepted-token-xyz' })).status).toBe(200);
  });

  it('exchanges ?token= once for an HttpOnly SameSite=Strict cookie and a redirect without the token', async () => {
    const res = await get(`/?token=${encodeURIComponent(TOKEN)}`);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/');
    const cookie = res.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^tether_inspect=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=\d+$/);
    expect(cookie).not.toContain(TOKEN);
    const jar = cookie.split(';')[0]!;
    const page = await get('/', { cookie: jar });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<script type="module" src="/app.js"></script>');
    expect((await get('/api/sessions', { cookie: jar })).status).toBe(200);
    // A wrong bearer token is refused even with a valid cookie: presented credentials are never ignored.
    expect((await get('/api/sessions', { cookie: jar, authorization: 'Bearer wrong-token-wrong-token' })).status).toBe(401);
  });

  it('takes the token from the login form, and logging out forgets the login', async () => {
    const form = await fetch(`${server.url}/login`, { method: 'POST', body: new URLSearchParams({ token: TOKEN }), redirect: 'manual' });
    expect(form.status).toBe(303);
    const jar = form.headers.get('set-cookie')!.split(';')[0]!;
    expect((await get('/api/sessions', { cookie: jar })).status).toBe(200);
    const out = await fetch(`${server.url}/logout`, { method: 'POST', headers: { cookie: jar }, redirect: 'manual' });
    expect(out.status).toBe(303);
    expect(out.headers.get('set-cookie')).toMatch(/Max-Age=0/);
    expect((await get('/api/sessions', { cookie: jar })).status).toBe(401);
    const bad = await fetch(`${server.url}/login`, { method: 'POST', body: new URLSearchParams({ token: 'nope-nope-nope-nope' }), redirect: 'manual' });
    expect(bad.status).toBe(401);
  });

  it('the API is read-only', async () => {
    const res = await fetch(`${server.url}/api/sessions`, { method: 'POST', headers: bearer, body: '{}' });
    expect(res.status).toBe(405);
  });
});

describe('what the page may load', () => {
  it('sets a strict Content-Security-Policy and friends on every answer', async () => {
    const jar = await login();
    for (const [path, headers] of [
      ['/', { cookie: jar }],
      ['/', {}],
      ['/app.js', {}],
      ['/inspect.css', {}],
      ['/api/sessions', bearer],
      ['/api/sessions', {}],
      ['/nowhere', {}],
      ['/healthz', {}],
    ] as const) {
      const res = await get(path, headers);
      expect(res.headers.get('content-security-policy'), path).toBe(CONTENT_SECURITY_POLICY);
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(res.headers.get('referrer-policy'), path).toBe('no-referrer');
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
    }
    expect(CONTENT_SECURITY_POLICY).toMatch(/^default-src 'self';/);
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/unsafe|https?:|\*/);
  });

  it('serves HTML, script and style that name no remote URL and inline nothing', async () => {
    const jar = await login();
    const texts = {
      page: await (await get('/', { cookie: jar })).text(),
      login: await (await get('/')).text(),
      // The page's three modules (app.js imports the other two).
      script: (await Promise.all(['/app.js', '/dom.js', '/tasks-view.js'].map(async (p) => (await get(p)).text()))).join('\n'),
      style: await (await get('/inspect.css')).text(),
      icon: await (await get('/favicon.svg')).text(),
    };
    for (const p of ['/app.js', '/dom.js', '/tasks-view.js']) expect((await get(p)).headers.get('content-type'), p).toBe('text/javascript; charset=utf-8');
    for (const [name, text] of Object.entries(texts)) {
      expect(text.length, name).toBeGreaterThan(100);
      // The only absolute URL is the SVG namespace, an identifier that is never fetched.
      const urls = [...text.matchAll(/(?:https?:|wss?:|ftp:)?\/\/[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g)].map((m) => m[0]);
      expect(urls.filter((u) => u !== 'http://www.w3.org'), name).toEqual([]);
      expect(text, name).not.toMatch(/@import|url\(\s*['"]?(?!#)[a-z]+:/i);
    }
    for (const html of [texts.page, texts.login]) {
      expect(html).not.toMatch(/<script(?![^>]*\bsrc="\/app\.js")/); // no inline script
      expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i); // no inline style or handlers
      for (const m of html.matchAll(/\s(?:src|href|action)="([^"]*)"/g)) expect(m[1], m[0]).toMatch(/^(\/|#)/);
    }
    expect(texts.script).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|eval\(|new Function/);
    expect(texts.script).toContain("fetch(path, { credentials: 'same-origin'");
  });
});

describe('sessions by tag only', () => {
  it('lists sessions, filters by verdict, and says which verdicts occur', async () => {
    const all = (await (await get('/api/sessions', bearer)).json()) as { sessions: { tag: string }[]; verdicts: string[] };
    expect(all.sessions.map((s) => s.tag)).toEqual([a, b]);
    expect(all.verdicts).toEqual(['epoch_mismatch', 'malformed', 'resumed']);
    const refused = (await (await get('/api/sessions?verdict=epoch_mismatch', bearer)).json()) as { sessions: { tag: string }[] };
    expect(refused.sessions.map((s) => s.tag)).toEqual([b]);
    expect((await get('/api/sessions?verdict=Bad!', bearer)).status).toBe(400);
    expect((await get('/api/sessions?limit=0', bearer)).status).toBe(400);
  });

  it("shows each session's principal by its tag and lists one principal's sessions", async () => {
    const [alice, bob] = RAW_PRINCIPALS.map(principalTag) as [string, string];
    const list = async (query: string): Promise<{ tag: string; principal: string }[]> => {
      const res = await get(`/api/sessions${query}`, bearer);
      expect(res.status, query).toBe(200);
      const text = await res.text();
      for (const digest of RAW_PRINCIPALS) expect(text, query).not.toContain(digest);
      return ((JSON.parse(text) as { sessions: { tag: string; principal: string }[] }).sessions);
    };
    expect((await list('')).map((s) => [s.tag, s.principal])).toEqual([[a, alice], [b, bob]]);
    expect((await list(`?principal=${alice}`)).map((s) => s.tag)).toEqual([a]);
    expect((await list(`?principal=${bob}&verdict=epoch_mismatch`)).map((s) => s.tag)).toEqual([b]);
    expect(await list(`?principal=${bob}&verdict=resumed`)).toEqual([]);
    const start = alice.slice(0, 3);
    expect((await list(`?principal=${start}`)).map((s) => s.tag)).toEqual([[a, alice], [b, bob]].filter(([, p]) => p!.startsWith(start)).map(([t]) => t));
    // A whole digest is matched by its tag (its first 12 characters), and is not echoed.
    expect((await list(`?principal=${RAW_PRINCIPALS[0]}`)).map((s) => s.tag)).toEqual([a]);
    for (const bad of ['not.a.tag', 'A'.repeat(44), 'a b', 'eyJhbGciOi.J9']) {
      const res = await get(`/api/sessions?principal=${encodeURIComponent(bad)}`, bearer);
      expect(res.status, bad).toBe(400);
      const body = (await res.json()) as { error: { message: string } };
      expect(body.error.message).toMatch(/^principal: a principal tag/);
      expect(body.error.message).not.toContain(bad);
    }
    const timeline = await get(`/api/sessions/${b}`, bearer);
    const text = await timeline.text();
    expect((JSON.parse(text) as { session: { principal: string } }).session.principal).toBe(bob);
    expect(text).not.toContain(RAW_PRINCIPALS[1]);
  });

  it('answers a timeline and a chain check by tag; 404 for an unknown tag', async () => {
    const t = (await (await get(`/api/sessions/${a}`, bearer)).json()) as { session: { tag: string }; lanes: unknown[] };
    expect(t.session.tag).toBe(a);
    expect(t.lanes).toHaveLength(2);
    const c = (await (await get(`/api/sessions/${a}/chains`, bearer)).json()) as { checks: { stream: string; ok: boolean }[] };
    expect(c.checks).toEqual([expect.objectContaining({ stream: '0', ok: true }), expect.objectContaining({ stream: '1', ok: true })]);
    expect((await get('/api/sessions/s_AAAAAAAAAAAA', bearer)).status).toBe(404);
    expect((await get('/api/sessions/s_AAAAAAAAAAAA/chains', bearer)).status).toBe(404);
  });

  it('refuses a raw session id (400) before asking the source, and no answer contains one', async () => {
    for (const id of RAW_IDS) {
      const before = source.calls.length;
      const res = await get(`/api/sessions/${id}`, bearer);
      expect(res.status).toBe(400);
      expect(await res.text()).not.toContain(id);
      expect((await get(`/api/sessions/${id}/chains`, bearer)).status).toBe(400);
      expect(source.calls.slice(before)).toEqual([]);
    }
    const jar = await login();
    const bodies = await Promise.all(
      ['/', '/app.js', '/api/sessions', '/api/sessions?verdict=resumed', `/api/sessions/${a}`, `/api/sessions/${b}`, `/api/sessions/${a}/chains`, `/api/sessions/${b}/chains`].map(async (p) => {
        const res = await get(p, { ...bearer, cookie: jar });
        expect(res.status, p).toBe(200);
        return res.text();
      }),
    );
    for (const body of bodies) for (const id of RAW_IDS) expect(body).not.toContain(id);
    expect(source.calls.every((c) => !RAW_IDS.some((id) => c.includes(id)))).toBe(true);
  });

  it('answers 500 without detail when the source fails', async () => {
    const failing = await startInspectServer({
      tokens: [TOKEN],
      source: { ...source, listSessions: () => Promise.reject(new Error(`nats down for ${RAW_IDS[0]}`)) },
    });
    try {
      const res = await fetch(`${failing.url}/api/sessions`, { headers: bearer });
      expect(res.status).toBe(500);
      expect(await res.text()).not.toContain(RAW_IDS[0]);
    } finally {
      await failing.close();
    }
  });
});

describe('tasks, listed only', () => {
  const tasks = fixtureTasks();
  it('lists tasks by tag, filtered by status and principal', async () => {
    const all = (await (await get('/api/tasks', bearer)).json()) as TaskList;
    expect(all.streamExists).toBe(true);
    expect(all.tasks.map((t) => t.tag)).toEqual(tasks.map((t) => t.tag));
    const failed = (await (await get('/api/tasks?status=failed', bearer)).json()) as TaskList;
    expect(failed.tasks.map((t) => t.tag)).toEqual(['Tk2def…']);
    const bobs = (await (await get(`/api/tasks?principal=${principalTag(RAW_PRINCIPALS[1])}`, bearer)).json()) as TaskList;
    expect(bobs.tasks.map((t) => t.tag)).toEqual(['Tk3ghi…']);
    expect(source.calls).toContain('tasks:failed:');
  });

  it('refuses bad filters (400) and any path under /api/tasks/ (404) without asking the source', async () => {
    const before = source.calls.length;
    for (const query of ['?status=running', '?status=Failed', '?limit=0', '?limit=1001', '?principal=a.b.c']) {
      const res = await get(`/api/tasks${query}`, bearer);
      expect(res.status, query).toBe(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('bad_request');
    }
    for (const path of ['/api/tasks/Tk1abc', '/api/tasks/AAAAAAAAAAAAAAAAAAAAAA', '/api/tasks/x/y']) {
      const res = await get(path, bearer);
      expect(res.status, path).toBe(404);
      expect(await res.text()).not.toContain('AAAAAAAAAAAAAAAAAAAAAA');
    }
    expect(source.calls.slice(before)).toEqual([]);
  });

  it('answers 501 where the source cannot read tasks (an operator API)', async () => {
    const grpcLike = await startInspectServer({
      tokens: [TOKEN],
      source: { ...source, listTasks: () => Promise.reject(Object.assign(new Error('no task RPCs'), { code: 'unsupported' })) },
    });
    try {
      const res = await fetch(`${grpcLike.url}/api/tasks`, { headers: bearer });
      expect(res.status).toBe(501);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('unsupported');
    } finally {
      await grpcLike.close();
    }
  });
});
