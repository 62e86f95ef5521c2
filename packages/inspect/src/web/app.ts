/**
 * The inspector page (browser code, compiled by `tsc -b` to
 * dist/browser/web/app.js and served by tether-inspect). It talks only to
 * its own server's /api/ (the login cookie goes along), builds the DOM with
 * createElement/textContent (never innerHTML, so nothing read from the log
 * can become markup) and draws the timeline as hand-written SVG. The task
 * list is tasks-view.ts; the shared helpers are dom.ts.
 */
import type { ChainCheck, Connection, EventMark, SessionSummary, SessionTimeline, StreamLane } from '../model.js';
import { age, api, app, bytes, clock, h, principalFilter, s } from './dom.js';
import type { Child } from './dom.js';
import { showTasks } from './tasks-view.js';

/** Verdicts that served the client; anything else refused it. */
const GOOD_VERDICTS = new Set(['resumed']);

const verdictClass = (v: string): string => (GOOD_VERDICTS.has(v) ? 'good' : 'bad');

function verdictChips(verdicts: Readonly<Record<string, number>>): HTMLElement {
  const span = h('span', { class: 'verdicts' });
  const entries = Object.entries(verdicts).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) span.append(h('span', { class: 'muted' }, 'none'));
  for (const [v, n] of entries) span.append(h('span', { class: `chip ${verdictClass(v)}`, 'data-verdict': v, 'data-count': n }, `${v} ${n}`));
  return span;
}

// ---------------------------------------------------------------- sessions

/** The list's address with its filters: `#/`, `#/?verdict=…&principal=…`. */
function listHash(filters: { readonly verdict: string; readonly principal: string }): string {
  const q = new URLSearchParams();
  if (filters.verdict !== '') q.set('verdict', filters.verdict);
  if (filters.principal !== '') q.set('principal', filters.principal);
  const text = q.toString();
  return text === '' ? '#/' : `#/?${text}`;
}

/** A principal tag, linked to the list of that principal's sessions; `—` when the registry forgot the session. */
function principalCell(principal: string): Child {
  return principal === '' ? h('span', { class: 'muted', title: 'unknown: the registry no longer holds this session' }, '—') : h('a', { href: listHash({ verdict: '', principal }), title: 'this principal\'s sessions' }, principal);
}

async function showSessions(verdict: string, principal: string): Promise<void> {
  const q = listHash({ verdict, principal }).slice(2);
  const { sessions, verdicts } = await api<{ sessions: SessionSummary[]; verdicts: string[] }>(`/api/sessions${q}`);
  const select = h('select', { id: 'verdict-filter', 'aria-label': 'filter by resume verdict' }, h('option', { value: '' }, 'any verdict'));
  for (const v of verdicts) select.append(h('option', { value: v }, v));
  select.value = verdict;
  select.addEventListener('change', () => {
    window.location.hash = listHash({ verdict: select.value, principal });
  });
  const { input, error: inputError } = principalFilter({ input: 'principal-filter', error: 'principal-error' }, principal, (value) => {
    window.location.hash = listHash({ verdict, principal: value });
  });
  const rows = sessions.map((x) =>
    h(
      'tr',
      { 'data-session': x.tag, 'data-principal': x.principal },
      h('td', { class: 'mono' }, h('a', { href: `#/session/${x.tag}` }, x.tag)),
      h('td', { class: 'mono principal' }, principalCell(x.principal)),
      h('td', { class: 'mono' }, x.route ?? '—'),
      h('td', {}, h('span', { class: `chip state-${x.state}` }, x.state)),
      h('td', { class: 'num', title: new Date(x.createdAtMs).toISOString() }, age(x.createdAtMs)),
      h('td', { class: 'num' }, String(x.streams)),
      h('td', {}, verdictChips(x.verdicts)),
    ),
  );
  const table = h(
    'table',
    { id: 'sessions' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Session'), h('th', {}, 'Principal'), h('th', {}, 'Route'), h('th', {}, 'State'), h('th', { class: 'num' }, 'Age'), h('th', { class: 'num' }, 'Streams'), h('th', {}, 'Resume verdicts'))),
    h('tbody', {}, ...rows),
  );
  app().replaceChildren(
    h('h1', {}, 'Sessions'),
    h(
      'div',
      { class: 'toolbar' },
      h('label', { for: 'verdict-filter' }, 'Resumes with verdict'),
      select,
      h('label', { for: 'principal-filter' }, 'Principal'),
      input,
      inputError,
      h('span', { class: 'muted', id: 'session-count' }, `${sessions.length} session${sessions.length === 1 ? '' : 's'}`),
    ),
    sessions.length === 0 ? h('p', { class: 'muted' }, 'No sessions.') : table,
  );
}

// ---------------------------------------------------------------- timeline

interface Layout {
  /** x of an instant; `k` tells apart the events of one lane stored in the same millisecond. */
  readonly x: (atMs: number, k?: number) => number;
  readonly slots: readonly number[];
  readonly width: number;
}

/**
 * The x axis is ordered by time but not proportional to it: every distinct
 * instant gets a slot. Events of one burst land within a millisecond while a
 * resume comes seconds later; a linear axis would pile the burst into one
 * pixel. Events of one lane in the same millisecond get a slot each. Tick
 * labels give the real clock time.
 */
function layout(timeline: SessionTimeline, left: number, minWidth: number): Layout {
  const keys = new Map<string, [number, number]>();
  const add = (t: number, k: number): void => void keys.set(`${t}:${k}`, [t, k]);
  for (const lane of timeline.lanes) subSlots(lane.events).forEach((k, i) => add(lane.events[i]!.atMs, k));
  for (const c of timeline.connections) add(c.atMs, 0);
  if (timeline.endedAtMs !== undefined) add(timeline.endedAtMs, 0);
  const ordered = [...keys.values()].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  // Room on the right for the last labels (a takeover, a connection's instance and verdict).
  const right = 190;
  const step = Math.max(16, Math.min(48, (minWidth - left - 24 - right) / Math.max(1, ordered.length - 1)));
  const index = new Map(ordered.map(([t, k], i) => [`${t}:${k}`, i]));
  const x = (t: number, k = 0): number => left + 24 + step * (index.get(`${t}:${k}`) ?? 0);
  const last = ordered[ordered.length - 1];
  return { slots: ordered.filter(([, k]) => k === 0).map(([t]) => t), width: Math.max(minWidth, (last === undefined ? left : x(last[0], last[1])) + right), x };
}

/** For each event, how many earlier events of its lane share its millisecond. */
function subSlots(events: readonly EventMark[]): number[] {
  return events.map((e, i) => {
    let k = 0;
    for (let j = i - 1; j >= 0 && events[j]!.atMs === e.atMs; j -= 1) k += 1;
    return k;
  });
}

const PALETTE = ['#4c78a8', '#9d5fbf', '#2a9d8f', '#e07a2f', '#6b8e23', '#b5497a'];
const KIND_FILL: Record<string, string> = { prime: '#9aa6b6', event: '#2458b3', end: '#1d2430' };

function laneTitle(lane: StreamLane): string {
  return lane.stream === '0' ? `stream 0 · GET` : `stream ${lane.stream} · POST`;
}

function markHeight(n: number): number {
  return Math.min(26, 6 + 3 * Math.log2(1 + n / 32));
}

function drawTimeline(timeline: SessionTimeline): SVGElement {
  const LEFT = 170;
  const LANE_H = 64;
  const TOP = 30;
  const lanes = timeline.lanes;
  const L = layout(timeline, LEFT, Math.max(900, (app().clientWidth || 1200) - 4));
  // Connection labels are stacked in rows, filled greedily: a label goes on the first row whose last label ends before it starts.
  const rowEnds: number[] = [];
  const rows = timeline.connections.map((c) => {
    const x = L.x(c.atMs);
    const width = 6.5 * Math.max(`${c.kind} @ ${c.instance}`.length, (c.verdict ?? '').length) + 12;
    let row = rowEnds.findIndex((end) => end < x);
    if (row === -1) row = rowEnds.length < 6 ? rowEnds.length : rowEnds.indexOf(Math.min(...rowEnds));
    rowEnds[row] = x + width;
    return row;
  });
  const CONN_H = 48 + Math.max(1, rowEnds.length) * 24;
  const height = TOP + lanes.length * LANE_H + CONN_H + 10;
  const svg = s('svg', { class: 'timeline', width: L.width, height, viewBox: `0 0 ${L.width} ${height}`, role: 'img', 'aria-label': `timeline of ${timeline.session.tag}` });
  const holder = instanceOfWriter(timeline.connections);
  const who = (writer: string): string => holder.get(writer) ?? writer;
  // One colour per instance, shared by its writer spans and its connections.
  const instances = [...new Set(timeline.connections.map((c) => c.instance).concat(lanes.flatMap((l) => l.writers.map((w) => who(w.writer)))))];
  const colorOf = (instance: string): string => PALETTE[Math.max(0, instances.indexOf(instance)) % PALETTE.length]!;

  // Time ticks: about one per 110 px.
  const every = Math.max(1, Math.ceil(110 / Math.max(1, L.x(L.slots[1] ?? 0) - L.x(L.slots[0] ?? 0))));
  L.slots.forEach((t, i) => {
    if (i % every !== 0) return;
    svg.append(s('line', { class: 'axis', x1: L.x(t), x2: L.x(t), y1: TOP - 6, y2: height - 6 }), s('text', { class: 'tick', x: L.x(t), y: 14, 'text-anchor': 'middle' }, clock(t)));
  });

  const laneY = new Map<string, number>();
  lanes.forEach((lane, i) => {
    const y = TOP + i * LANE_H;
    laneY.set(lane.stream, y);
    const g = s('g', { class: 'lane', 'data-lane': lane.stream, 'data-ended': String(lane.ended) });
    const total = lane.events.reduce((n, e) => n + e.bytes, 0);
    g.append(
      s('rect', { class: 'lane-bg', x: 0, y: y + 2, width: L.width, height: LANE_H - 4 }),
      s('text', { class: 'lane-label', x: 10, y: y + 24 }, laneTitle(lane)),
      s('text', { class: 'lane-sub', x: 10, y: y + 40 }, `${lane.events.length} events · ${bytes(total)}${lane.ended ? ' · ended' : ''}`),
    );
    const ks = subSlots(lane.events);
    const xOf = new Map(lane.events.map((e, j) => [e.seq, L.x(e.atMs, ks[j])]));
    for (const w of lane.writers) {
      const from = xOf.get(w.fromSeq);
      const to = xOf.get(w.toSeq);
      if (from === undefined || to === undefined) continue;
      const x1 = from - 8;
      const x2 = to + 8;
      g.append(
        s(
          'rect',
          { class: 'writer', 'data-writer': w.writer, 'data-instance': holder.get(w.writer), 'data-takeover': String(w.takeover), x: x1, y: y + 14, width: Math.max(16, x2 - x1), height: LANE_H - 22, rx: 4, fill: colorOf(who(w.writer)), 'fill-opacity': 0.14, stroke: colorOf(who(w.writer)), 'stroke-opacity': 0.6 },
          s('title', {}, `writer ${w.writer}${holder.has(w.writer) ? ` held by ${holder.get(w.writer)!}` : ''} · seq ${w.fromSeq}–${w.toSeq}`),
        ),
      );
      if (w.takeover) {
        g.append(
          s('line', { class: 'takeover', x1: x1 - 2, x2: x1 - 2, y1: y + 2, y2: y + LANE_H - 2 }),
          s('text', { class: 'takeover-label', x: x1 + 3, y: y + 11, 'data-takeover-by': who(w.writer) }, `takeover → ${who(w.writer)}`),
        );
      } else {
        g.append(s('text', { class: 'writer-label', x: x1 + 3, y: y + 11, 'data-writer-of': who(w.writer) }, `written by ${who(w.writer)}`));
      }
    }
    lane.events.forEach((e, j) => g.append(drawMark(lane, e, L.x(e.atMs, ks[j]), y + LANE_H - 12, L.slots.length < 80)));
    svg.append(g);
  });

  // Client connections: their own lane, each linked up to the stream it read.
  const cy = TOP + lanes.length * LANE_H;
  svg.append(
    s('rect', { class: 'lane-bg', x: 0, y: cy + 2, width: L.width, height: CONN_H - 4 }),
    s('text', { class: 'lane-label', x: 10, y: cy + 24 }, 'client connections'),
    s('text', { class: 'lane-sub', x: 10, y: cy + 40 }, `${timeline.connections.length} requests`),
  );
  timeline.connections.forEach((c, i) => {
    svg.append(drawConnection(c, rows[i] ?? 0, L.x(c.atMs), cy, c.stream === undefined ? undefined : laneY.get(c.stream), LANE_H, colorOf(c.instance)));
  });

  if (timeline.endedAtMs !== undefined) {
    const x = L.x(timeline.endedAtMs) + 10;
    svg.append(
      s('g', { class: 'session-end', 'data-ended-at': timeline.endedAtMs }, s('line', { class: 'end-line', x1: x, x2: x, y1: TOP - 8, y2: height - 6 }), s('text', { class: 'end-label', x: x + 5, y: TOP + 4 }, 'session closed')),
    );
  }
  return svg;
}

function drawMark(lane: StreamLane, e: EventMark, x: number, base: number, seqLabels: boolean): SVGElement {
  const hgt = markHeight(e.bytes);
  const fill = KIND_FILL[e.kind] ?? '#b7791f';
  const title = s('title', {}, `stream ${lane.stream} · seq ${e.seq} · pos ${e.pos} · ${e.kind} · ${bytes(e.bytes)}${e.writer === undefined ? '' : ` · writer ${e.writer}`}${e.endReason === undefined ? '' : ` · ${e.endReason}`} · ${clock(e.atMs)}`);
  const attrs = { class: 'mark', 'data-kind': e.kind, 'data-seq': e.seq, 'data-bytes': e.bytes, 'data-stream': lane.stream };
  const shape =
    e.kind === 'end'
      ? s('path', { d: `M${x} ${base - 16} l7 8 l-7 8 l-7 -8 z`, fill })
      : e.kind === 'prime'
        ? s('circle', { cx: x, cy: base - 4, r: 4, fill: '#fff', stroke: fill, 'stroke-width': 2 })
        : s('rect', { x: x - 4, y: base - hgt, width: 8, height: hgt, rx: 1.5, fill });
  return s('g', attrs, title, shape, seqLabels ? s('text', { class: 'seq', x, y: base + 10, 'text-anchor': 'middle' }, String(e.seq)) : undefined);
}

function drawConnection(c: Connection, row: number, x: number, cy: number, laneTop: number | undefined, laneH: number, color: string): SVGElement {
  const verdict = c.verdict;
  const g = s('g', { class: 'connection', 'data-kind': c.kind, 'data-instance': c.instance, 'data-verdict': verdict, 'data-stream': c.stream });
  if (laneTop !== undefined) g.append(s('line', { class: 'link', x1: x, x2: x, y1: laneTop + laneH - 6, y2: cy + 14 }));
  const ly = cy + 34 + row * 24;
  g.append(
    s('title', {}, connectionText(c)),
    s('circle', { cx: x, cy: cy + 14, r: 6, fill: verdict === undefined ? color : GOOD_VERDICTS.has(verdict) ? '#1f8a4c' : '#c23434', stroke: '#fff', 'stroke-width': 1.5 }),
    s('line', { class: 'axis', x1: x, x2: x, y1: cy + 20, y2: ly - 10 }),
    s('text', { class: 'conn-label', x: x + 4, y: ly }, `${c.kind} @ ${c.instance}`),
  );
  if (verdict !== undefined) g.append(s('text', { class: GOOD_VERDICTS.has(verdict) ? 'conn-verdict-good' : 'conn-verdict-bad', x: x + 4, y: ly + 11 }, verdict));
  return g;
}

/** Which instance held each writer id: claims and takeovers name both. */
function instanceOfWriter(connections: readonly Connection[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const c of connections) if (c.writer !== undefined && !out.has(c.writer)) out.set(c.writer, c.instance);
  return out;
}

function cursorText(c: Connection): string {
  return c.cursor === undefined ? '—' : `stream ${c.cursor.stream} · seq ${c.cursor.seq} · pos ${c.cursor.pos}`;
}

function connectionText(c: Connection): string {
  return `${clock(c.atMs)} · ${c.kind} on ${c.instance}${c.stream === undefined ? '' : ` · stream ${c.stream}`}${c.cursor === undefined ? '' : ` · cursor ${cursorText(c)}`}${c.verdict === undefined ? '' : ` · ${c.verdict}`}`;
}

function legend(): HTMLElement {
  const item = (shape: SVGElement, text: string): HTMLElement => {
    const svg = s('svg', { width: 16, height: 16, viewBox: '0 0 16 16' }, shape);
    return h('span', {}, svg, text);
  };
  return h(
    'div',
    { class: 'legend' },
    item(s('rect', { x: 4, y: 2, width: 8, height: 12, fill: KIND_FILL.event! }), 'event (height grows with size)'),
    item(s('circle', { cx: 8, cy: 8, r: 4, fill: '#fff', stroke: KIND_FILL.prime!, 'stroke-width': 2 }), 'prime'),
    item(s('path', { d: 'M8 0 l7 8 l-7 8 l-7 -8 z', fill: KIND_FILL.end! }), 'end of stream'),
    item(s('circle', { cx: 8, cy: 8, r: 6, fill: '#1f8a4c' }), 'resume served'),
    item(s('circle', { cx: 8, cy: 8, r: 6, fill: '#c23434' }), 'resume refused'),
    h('span', {}, 'x axis: in time order, one slot per instant (not to scale); hover a mark for its details'),
  );
}

function connectionsTable(timeline: SessionTimeline): HTMLElement {
  const t0 = timeline.session.createdAtMs;
  const rows = timeline.connections.map((c) =>
    h(
      'tr',
      { 'data-connection': c.kind, 'data-verdict': c.verdict },
      h('td', { class: 'mono' }, clock(c.atMs)),
      h('td', { class: 'num' }, `+${c.atMs - t0} ms`),
      h('td', {}, c.kind),
      h('td', { class: 'mono' }, c.instance),
      h('td', { class: 'mono' }, c.stream ?? '—'),
      h('td', { class: 'mono' }, cursorText(c)),
      h('td', {}, c.verdict === undefined ? h('span', { class: 'muted' }, '—') : h('span', { class: `chip ${verdictClass(c.verdict)}` }, c.verdict)),
      h('td', { class: 'num' }, c.events === undefined ? '—' : String(c.events)),
      h('td', { class: 'num' }, c.status === undefined ? '—' : String(c.status)),
      h('td', { class: 'muted' }, [c.reason, c.from === undefined ? undefined : `from ${c.from.slice(0, 10)}`].filter((x) => x !== undefined).join(' · ') || '—'),
    ),
  );
  return h(
    'table',
    { id: 'connections' },
    h('thead', {}, h('tr', {}, ...['Time', 'Since start', 'Request', 'Instance', 'Stream', 'Cursor', 'Verdict', 'Events', 'Status', 'Note'].map((x) => h('th', { class: ['Since start', 'Events', 'Status'].includes(x) ? 'num' : undefined }, x)))),
    h('tbody', {}, ...rows),
  );
}

function chainsTable(checks: readonly ChainCheck[]): HTMLElement {
  const rows = checks.map((c) =>
    h(
      'tr',
      { 'data-chain': c.stream, 'data-ok': String(c.ok) },
      h('td', { class: 'mono' }, c.stream),
      h('td', {}, c.ok ? h('span', { class: 'ok' }, '✓ intact') : h('span', { class: 'bad' }, `✗ ${c.problems.length} problem${c.problems.length === 1 ? '' : 's'}`)),
      h('td', { class: 'num' }, String(c.events)),
      h('td', {}, ...c.problems.map((p) => h('div', { class: 'mono' }, `${p.kind} at seq ${p.seq} · pos ${p.pos}: ${p.detail}`))),
    ),
  );
  return h('table', { id: 'chains' }, h('thead', {}, h('tr', {}, h('th', {}, 'Stream'), h('th', {}, 'Chain'), h('th', { class: 'num' }, 'Events'), h('th', {}, 'Holes and forks'))), h('tbody', {}, ...rows));
}

async function showSession(tag: string): Promise<void> {
  const timeline = await api<SessionTimeline>(`/api/sessions/${encodeURIComponent(tag)}`);
  const x = timeline.session;
  const result = h('div', { class: 'chains', id: 'chain-result' });
  const button = h('button', { id: 'check-chains', class: 'primary', type: 'button' }, 'Check chains');
  button.addEventListener('click', () => {
    button.disabled = true;
    result.replaceChildren(h('p', { class: 'muted' }, 'Checking every stream…'));
    api<{ checks: ChainCheck[] }>(`/api/sessions/${encodeURIComponent(tag)}/chains`).then(
      ({ checks }) => result.replaceChildren(chainsTable(checks)),
      (err: unknown) => result.replaceChildren(h('p', { class: 'error' }, `Chain check failed: ${(err as Error).message}`)),
    ).finally(() => (button.disabled = false));
  });
  const field = (name: string, value: Child): HTMLElement => h('div', {}, h('span', {}, name), value);
  app().replaceChildren(
    h('p', {}, h('a', { href: '#/' }, '← all sessions')),
    h('h1', { id: 'session-tag', class: 'mono' }, x.tag),
    h(
      'div',
      { class: 'summary' },
      field('principal', h('code', { id: 'session-principal' }, principalCell(x.principal))),
      field('route', h('code', {}, x.route ?? '—')),
      field('state', h('span', { class: `chip state-${x.state}` }, x.state)),
      field('started', `${clock(x.createdAtMs)} (${age(x.createdAtMs)} ago)`),
      field('ended', timeline.endedAtMs === undefined ? 'not yet' : clock(timeline.endedAtMs)),
      field('streams', String(x.streams)),
      field('resumes', verdictChips(x.verdicts)),
    ),
    h('div', { class: 'timeline-wrap' }),
    legend(),
    h('h2', {}, 'Client connections and resumes'),
    timeline.connections.length === 0 ? h('p', { class: 'muted' }, 'No audit events recorded for this session.') : connectionsTable(timeline),
    h('h2', {}, 'Chain check'),
    h('p', { class: 'muted' }, 'Reads every stream of the session from the log and checks seq and prev links, by position.'),
    button,
    result,
  );
  // Drawn after the page is laid out, so the timeline can take the page's width.
  app().querySelector('.timeline-wrap')!.append(drawTimeline(timeline));
}

// ---------------------------------------------------------------- routing

async function route(): Promise<void> {
  const hash = window.location.hash.replace(/^#/, '') || '/';
  try {
    const session = /^\/session\/([A-Za-z0-9_-]+)$/.exec(hash);
    const filters = new URLSearchParams(hash.split('?')[1] ?? '');
    if (session !== null) await showSession(session[1]!);
    else if (/^\/tasks(\?|$)/.test(hash)) await showTasks(filters.get('status') ?? '', filters.get('principal') ?? '');
    else await showSessions(filters.get('verdict') ?? '', filters.get('principal') ?? '');
  } catch (err) {
    app().replaceChildren(h('p', { class: 'error', id: 'load-error' }, `Could not load: ${(err as Error).message}`), h('p', {}, h('a', { href: '#/' }, '← all sessions')));
  }
  document.body.dataset.ready = hash;
}

window.addEventListener('hashchange', () => void route());
void route();
