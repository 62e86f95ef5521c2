import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { CryptoKey, JWK, JWTPayload } from 'jose';

/**
 * A real HTTP server in this process serving a JWKS of keys generated here,
 * for what the test kit's authorization server cannot do: fail on demand
 * (error status, an oversized body, a body that trickles) while counting
 * every fetch. It answers every path and method alike, so a failing
 * introspection endpoint is one too.
 */
export type JwksMode = 'ok' | 'error' | 'oversized' | 'trickle';

export interface SigningKey {
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
}

export interface JwksEndpoint {
  readonly url: string;
  /** Requests received so far. */
  readonly fetches: number;
  /** How the next requests are answered. */
  mode: JwksMode;
  /** The public keys served in mode `ok`. */
  keys: SigningKey[];
  close(): Promise<void>;
}

const OVERSIZED_BYTES = 8 * 1024 * 1024;

export async function newSigningKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } };
}

export async function startJwksEndpoint(keys: SigningKey[]): Promise<JwksEndpoint> {
  let fetches = 0;
  const server = createServer((req, res) => {
    fetches += 1;
    void answer(endpoint.mode, res);
  });
  const endpoint: JwksEndpoint = {
    url: '',
    get fetches() {
      return fetches;
    },
    mode: 'ok',
    keys,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
  async function answer(mode: JwksMode, res: import('node:http').ServerResponse): Promise<void> {
    if (mode === 'ok') {
      res.writeHead(200, { 'content-type': 'application/jwk-set+json' });
      res.end(JSON.stringify({ keys: endpoint.keys.map((k) => k.publicJwk) }));
      return;
    }
    if (mode === 'error') {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('down');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"keys":[');
    // oversized: 8 MiB (no content-length) as fast as the reader takes it, then a
    // truncated end; trickle: a byte every 200 ms, for ever.
    const chunk = mode === 'oversized' ? `${JSON.stringify(endpoint.keys[0]!.publicJwk)},`.repeat(64) : ' ';
    let sent = 0;
    while (!res.destroyed && !res.writableEnded && (mode === 'trickle' || sent < OVERSIZED_BYTES)) {
      sent += chunk.length;
      if (!res.write(chunk)) {
        await new Promise<void>((resolve) => {
          const go = (): void => {
            res.off('drain', go).off('close', go);
            resolve();
          };
          res.on('drain', go).on('close', go);
        });
      }
      if (mode === 'trickle') await sleep(200);
    }
    if (!res.destroyed) res.end();
  }
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  (endpoint as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`;
  return endpoint;
}

/** A JWT access token signed with `key`; `kid: undefined` leaves the header without one. */
export function signToken(key: SigningKey, claims: JWTPayload & { iss: string; aud: string | string[] }, header: { kid?: string | undefined; typ?: string } = {}): Promise<string> {
  const nowS = Math.floor(Date.now() / 1000);
  const kid = 'kid' in header ? header.kid : key.kid;
  return new SignJWT({ sub: 'user-1', iat: nowS, exp: nowS + 48 * 3600, ...claims })
    .setProtectedHeader({ alg: 'ES256', typ: header.typ ?? 'at+jwt', ...(kid === undefined ? {} : { kid }) })
    .sign(key.privateKey);
}
