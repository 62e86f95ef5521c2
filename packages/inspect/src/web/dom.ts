/**
 * The page's small DOM toolkit, shared by its views (app.ts, tasks-view.ts):
 * elements built with createElement/textContent (no markup is ever parsed, so nothing
 * read from the log can become markup), the API call, and the units.
 */
export const SVG_NS = 'http://www.w3.org/2000/svg';

export type Attrs = Record<string, string | number | undefined>;
export type Child = Node | string | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined) el.setAttribute(k, String(v));
  for (const c of children) if (c !== undefined && c !== false) el.append(c);
  return el;
}

export function s(tag: string, attrs: Attrs = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined) el.setAttribute(k, String(v));
  for (const c of children) if (c !== undefined && c !== false) el.append(c);
  return el;
}

export async function api<T>(path: string): Promise<T> {
  const res = await fetch(path, { credentials: 'same-origin', headers: { accept: 'application/json' } });
  if (res.status === 401) {
    window.location.assign('/');
    throw new Error('login needed');
  }
  const body = (await res.json()) as T & { error?: { message: string } };
  if (!res.ok) throw new Error(body.error?.message ?? `HTTP ${res.status}`);
  return body;
}

export const app = (): HTMLElement => document.getElementById('app')!;

/** A duration as the page shows it: `42 s`, `7 min`, `3 h`, `2 d`. */
export function duration(ms: number): string {
  const sec = Math.max(0, Math.round(ms / 1000));
  if (sec < 90) return `${sec} s`;
  if (sec < 90 * 60) return `${Math.round(sec / 60)} min`;
  if (sec < 36 * 3600) return `${Math.round(sec / 3600)} h`;
  return `${Math.round(sec / 86400)} d`;
}

/** How long ago `atMs` was. */
export function age(atMs: number): string {
  return duration(Date.now() - atMs);
}

export function clock(ms: number): string {
  const d = new Date(ms);
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** What a principal filter takes (the server checks it too): a principal tag or its start, up to a whole digest. */
export const PRINCIPAL_FILTER = /^[A-Za-z0-9_-]{1,43}$/;

/**
 * The principal filter of a list view: a search box and its error line.
 * `apply` gets a valid value (or '' for any); a value that is not a tag is
 * refused and not echoed, so a token pasted there by mistake stays out of
 * the page.
 */
export function principalFilter(ids: { input: string; error: string }, value: string, apply: (principal: string) => void): { input: HTMLInputElement; error: HTMLSpanElement } {
  const input = h('input', { id: ids.input, type: 'search', placeholder: 'any principal', maxlength: 43, size: 16, spellcheck: 'false', autocomplete: 'off', 'aria-label': 'filter by principal tag' });
  input.value = value;
  const error = h('span', { class: 'error', id: ids.error });
  input.addEventListener('change', () => {
    const next = input.value.trim();
    if (next !== '' && !PRINCIPAL_FILTER.test(next)) {
      error.textContent = 'a principal tag or its start: 1 to 43 of A-Z a-z 0-9 _ -';
      return;
    }
    error.textContent = '';
    apply(next);
  });
  return { input, error };
}
