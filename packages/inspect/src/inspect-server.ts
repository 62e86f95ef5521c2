/**
 * `tether-inspect`'s HTTP server: one read-only page, its script and style
 * (all served from here: the page loads nothing from anywhere else), and the
 * JSON API. Every answer carries a strict Content-Security-Policy
 * (`default-src 'self'`, no inline script or style, no framing), so even a
 * bug in the page could not send data to a third party.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerApi } from './inspect-api.js';
import type { InspectSource } from './inspect-api.js';
import { createInspectAuth } from './inspect-auth.js';
import { scrub } from './errors.js';

export const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; font-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

/** Minimal logger surface (pino's), so tests can pass none. */
export interface InspectLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface InspectServerOptions {
  readonly source: InspectSource;
  /** Accepted access tokens (at least one). */
  readonly tokens: readonly string[];
  /** Default `127.0.0.1`. */
  readonly host?: string;
  /** Default 0 (any free port). */
  readonly port?: number;
  readonly logger?: InspectLogger;
}

export interface InspectServer {
  /** `http://host:port`. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

interface Asset {
  readonly type: string;
  readonly body: Buffer;
}

/** Code, style and icon: they hold no data, and the login page needs the style. */
const PUBLIC_ASSETS: ReadonlySet<string> = new Set(['/app.js', '/dom.js', '/tasks-view.js', '/inspect.css', '/favicon.svg']);

/** The package root: one level above both `src/` (tests) and `dist/` (the built service). */
const ROOT = new URL('..', import.meta.url);

function loadAssets(): Map<string, Asset> {
  const read = (rel: string): Buffer => {
    try {
      return readFileSync(new URL(rel, ROOT));
    } catch (err) {
      throw new Error(`tether-inspect: cannot read ${rel} (run \`npm run build\` first): ${(err as Error).message}`, { cause: err });
    }
  };
  return new Map<string, Asset>([
    ['/', { type: 'text/html; charset=utf-8', body: read('src/web/index.html') }],
    ['/login', { type: 'text/html; charset=utf-8', body: read('src/web/login.html') }],
    ['/inspect.css', { type: 'text/css; charset=utf-8', body: read('src/web/inspect.css') }],
    ['/favicon.svg', { type: 'image/svg+xml', body: read('src/web/favicon.svg') }],
    // The page's modules: app.js imports the other two by relative path.
    ['/app.js', { type: 'text/javascript; charset=utf-8', body: read('dist/browser/web/app.js') }],
    ['/dom.js', { type: 'text/javascript; charset=utf-8', body: read('dist/browser/web/dom.js') }],
    ['/tasks-view.js', { type: 'text/javascript; charset=utf-8', body: read('dist/browser/web/tasks-view.js') }],
  ]);
}

/** Starts the server and resolves once it listens. */
export async function startInspectServer(options: InspectServerOptions): Promise<InspectServer> {
  const assets = loadAssets();
  const auth = createInspectAuth({ tokens: options.tokens });
  const { source, logger } = options;

  const send = (res: ServerResponse, status: number, type: string, body: string | Buffer, extra: Record<string, string> = {}): void => {
    res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
    res.end(body);
  };
  const sendJson = (res: ServerResponse, status: number, body: unknown, extra: Record<string, string> = {}): void =>
    send(res, status, 'application/json; charset=utf-8', JSON.stringify(body), extra);
  const sendAsset = (res: ServerResponse, path: string, status = 200, extra: Record<string, string> = {}): void => {
    const asset = assets.get(path)!;
    send(res, status, asset.type, asset.body, extra);
  };
  const redirect = (res: ServerResponse, location: string, cookie: string): void => {
    res.writeHead(303, { ...SECURITY_HEADERS, location, 'set-cookie': cookie, 'content-length': 0 });
    res.end();
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://inspect.invalid');
    const method = req.method ?? 'GET';
    const path = url.pathname;

    if (path === '/healthz' && (method === 'GET' || method === 'HEAD')) return send(res, 200, 'text/plain; charset=utf-8', 'ok\n');
    if (PUBLIC_ASSETS.has(path) && (method === 'GET' || method === 'HEAD')) return sendAsset(res, path);

    if (path === '/login' && method === 'POST') {
      const token = new URLSearchParams(await readBody(req, 4096)).get('token') ?? '';
      if (auth.tokenMatches(token)) return redirect(res, '/', auth.login());
      return sendAsset(res, '/login', 401);
    }
    if (path === '/logout' && method === 'POST') return redirect(res, '/', auth.logout(req));

    if (path.startsWith('/api/')) {
      if (method !== 'GET' && method !== 'HEAD') return sendJson(res, 405, { error: { code: 'method_not_allowed', message: 'the API is read-only: GET' } }, { allow: 'GET, HEAD' });
      if (!auth.allows(req)) {
        return sendJson(res, 401, { error: { code: 'unauthorized', message: 'needs Authorization: Bearer <token> or a login' } }, { 'www-authenticate': 'Bearer realm="tether-inspect"' });
      }
      try {
        const answer = await answerApi(source, path, url.searchParams);
        return sendJson(res, answer.status, answer.body);
      } catch (err) {
        // Read errors can name a subject, and a subject holds the raw session id: the log gets the code and a scrubbed message, the client neither.
        logger?.error({ code: codeOf(err), error: scrub(String((err as Error)?.message ?? err)), path }, 'inspect read failed');
        const unavailable = ['unavailable', 'log_not_found'].includes(codeOf(err) ?? '');
        return sendJson(res, unavailable ? 503 : 500, { error: { code: unavailable ? 'unavailable' : 'read_failed', message: 'reading the log failed; see the inspector log' } });
      }
    }

    if (path === '/' && (method === 'GET' || method === 'HEAD')) {
      const token = url.searchParams.get('token');
      if (token !== null) {
        // Exchanged once for a cookie; the redirect drops the token from the address bar (the #fragment is kept by the browser).
        if (auth.tokenMatches(token)) return redirect(res, '/', auth.login());
        return sendAsset(res, '/login', 401);
      }
      if (!auth.allows(req)) return sendAsset(res, '/login', 401, { 'www-authenticate': 'Bearer realm="tether-inspect"' });
      return sendAsset(res, '/');
    }
    return sendJson(res, 404, { error: { code: 'not_found', message: 'no such path' } });
  }

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      logger?.error({ error: scrub(String((err as Error)?.message ?? err)) }, 'inspect request failed');
      if (!res.headersSent) sendJson(res, 400, { error: { code: 'bad_request', message: (err as Error).message } });
      else res.destroy();
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err === undefined ? resolve() : reject(err)));
        server.closeAllConnections();
      }),
  };
}

const codeOf = (err: unknown): string | undefined => {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
};


async function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new Error(`request body over ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
