import fc from 'fast-check';
import type { RouteName } from './gateway-auth-stack.js';
import { byteString, fieldText, utf8Bytes } from './http-arbitraries.js';

/**
 * Arbitraries of the `--auth jwt` fuzz suite: `Authorization` header values,
 * as recipes. Most derive from real access tokens (a bank minted from the
 * issuer for each route when the suite starts), so they are materialized at
 * run time against that bank; each materialized value says what the gateway
 * owes it (a real token: accepted on its own route only; refused; or refused
 * because the signature does not verify). Which route a request goes to,
 * and the header lines around the value, are auth-header-arbitraries.ts'.
 */

const B64URL = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'];
/** RFC 6750's b64token (token68) alphabet, minus the trailing `=`. */
const TOKEN68 = [...B64URL, '.', '~', '+', '/'];

const segment = (maxLength: number): fc.Arbitrary<string> => fc.string({ unit: fc.constantFrom(...B64URL), maxLength });

/** How the credential is introduced: `ok` when RFC 6750 (and the gateway) must take it as a Bearer token. */
export interface SchemeRecipe {
  readonly text: string;
  readonly ok: boolean;
}

export const goodScheme: fc.Arbitrary<SchemeRecipe> = fc
  .tuple(fc.constantFrom('Bearer', 'Bearer', 'Bearer', 'bearer', 'BEARER', 'bEARER'), fc.constantFrom(' ', ' ', ' ', '  ', '   '))
  .map(([scheme, sep]) => ({ text: `${scheme}${sep}`, ok: true }));

/** Not "Bearer" and one or more spaces: another scheme, none, a near miss, another separator. */
const badScheme: fc.Arbitrary<SchemeRecipe> = fc
  .oneof(
    fc.constantFrom('', 'Basic ', 'Token ', 'DPoP ', 'Bear ', 'Bearerx ', 'Bearer:', 'Bearer=', 'Bearer\t', 'Bearer,', 'Bearer', 'Bearer "', 'Bearer Bearer ', 'MAC ', 'Négociez '),
    fc.string({ unit: fc.constantFrom(...B64URL, ' ', '\t', ':'), maxLength: 10 }).filter((s) => !/^bearer +$/i.test(s)),
  )
  .map((text) => ({ text: byteString(text), ok: false }));

export const schemeRecipe: fc.Arbitrary<SchemeRecipe> = fc.oneof({ weight: 5, arbitrary: goodScheme }, { weight: 1, arbitrary: badScheme });

/** A change to a real token's protected header; the payload and signature are kept (`emptySignature`: `alg: none`'s empty one). */
export type HeaderSwap =
  | { readonly t: 'set'; readonly name: string; readonly value: unknown }
  | { readonly t: 'drop'; readonly name: 'alg' | 'kid' | 'typ' }
  | { readonly t: 'huge-kid'; readonly length: number; readonly char: string }
  | { readonly t: 'not-json'; readonly text: string };

const headerSwap: fc.Arbitrary<HeaderSwap> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ t: fc.constant('set' as const), name: fc.constant('alg'), value: fc.oneof(fc.constantFrom('none', 'None', 'NONE', 'HS256', 'HS384', 'HS512', 'RS512', 'PS256', 'ES256', 'EdDSA', 'RSA-OAEP', ''), fc.string({ maxLength: 12 }), fc.constantFrom(null, 0, [], {}, true)) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('set' as const), name: fc.constant('kid'), value: fc.oneof(segment(43), fc.string({ maxLength: 40 }), fc.constantFrom(null, 0, -1, [], {}, true, '', '../../jwks', 'null')) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('huge-kid' as const), length: fc.integer({ min: 200, max: 9_000 }), char: fc.constantFrom('A', 'k', '-', 'é', '\u0000') }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('drop' as const), name: fc.constantFrom('alg' as const, 'kid' as const, 'typ' as const) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('set' as const),
      name: fc.constantFrom('typ', 'crit', 'b64', 'jku', 'x5u', 'jwk', 'cty', 'zip', 'x5c', 'extra'),
      value: fc.oneof(fc.constantFrom('JWT', 'at+jwt', 'jwt', ['exp'], ['b64'], ['unknown'], false, 'DEF', 'http://127.0.0.1:1/jwks', { kty: 'oct', k: 'AAAA' }), fc.jsonValue({ maxDepth: 2 })),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('not-json' as const), text: fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom('', '{', '[]', 'null', '"x"', '{"alg":"RS256"', '{"alg":"RS256","alg":"none"}')) }) },
);

/** A change to a real token's claims; the result is signed by nobody (the original signature is kept). */
export type ClaimEdit =
  | { readonly t: 'set'; readonly name: string; readonly value: unknown }
  | { readonly t: 'delete'; readonly name: string }
  | { readonly t: 'reorder' }
  | { readonly t: 'spaces' };

const CLAIMS = ['sub', 'iss', 'aud', 'exp', 'nbf', 'iat', 'scope', 'scp', 'client_id', 'jti', 'azp'];
const claimEdit: fc.Arbitrary<ClaimEdit> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      t: fc.constant('set' as const),
      name: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...CLAIMS) }, { weight: 1, arbitrary: fc.string({ maxLength: 10 }) }),
      value: fc.oneof(
        fc.constantFrom('client-a', 'client-b', 'admin', '', 'mcp:tools mcp:admin', 4_102_444_800, 0, -1, 1e308, null, ['x'], 'http://127.0.0.1:1/mcp'),
        fc.jsonValue({ maxDepth: 2 }),
      ),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('delete' as const), name: fc.constantFrom(...CLAIMS) }) },
  { weight: 1, arbitrary: fc.constant({ t: 'reorder' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'spaces' as const }) },
);

export type AuthRecipe =
  /** Any header value: empty, a scheme alone, another scheme, random text, Unicode and latin1 bytes. */
  | { readonly t: 'free'; readonly value: string }
  /** A credential near the header limit: random token68 characters, or a real header and signature around a huge payload. */
  | { readonly t: 'long'; readonly scheme: SchemeRecipe; readonly length: number; readonly chunk: string; readonly jwt: boolean; readonly pick: number }
  /** 1–5 random base64url segments. */
  | { readonly t: 'segments'; readonly scheme: SchemeRecipe; readonly segments: readonly string[] }
  /** A real token, as a client sends it. */
  | { readonly t: 'valid'; readonly scheme: SchemeRecipe; readonly pick: number }
  /** Segments of real tokens, shuffled, repeated, mixed between tokens. */
  | { readonly t: 'pieces'; readonly scheme: SchemeRecipe; readonly pieces: readonly { readonly pick: number; readonly seg: number }[] }
  | { readonly t: 'header'; readonly scheme: SchemeRecipe; readonly pick: number; readonly swap: HeaderSwap; readonly emptySignature: boolean }
  | { readonly t: 'claims'; readonly scheme: SchemeRecipe; readonly pick: number; readonly edits: readonly ClaimEdit[] }
  /** The signature cut to `keep` characters (fewer than it has). */
  | { readonly t: 'truncated'; readonly scheme: SchemeRecipe; readonly pick: number; readonly keep: number }
  | { readonly t: 'junk'; readonly scheme: SchemeRecipe; readonly pick: number; readonly where: 'prefix' | 'suffix' | 'inside'; readonly at: number; readonly junk: string };

const junk = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(...TOKEN68), minLength: 1, maxLength: 12 }) },
  { weight: 2, arbitrary: fc.constantFrom('.', '..', '.x', '=', '==', '===', '~', '+', '/', ' x', ',', ';', '\t1', '\u00ff', '.eyJ9', '"', '\\') },
  { weight: 1, arbitrary: fieldText(16).filter((s) => s.trim() !== '') },
);

/** Malformed values with no real token in them. */
export const malformedAuthorization: fc.Arbitrary<AuthRecipe> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .oneof(
        fc.constantFrom('', ' ', 'Bearer', 'Bearer ', 'Bearer  ', 'bearer', 'BEARER ', 'Basic x', 'Basic Zm9vOmJhcg==', 'Bearer null', 'Bearer undefined', 'Bearer .', 'Bearer ..', 'Bearer ...', 'Bearer =', 'Bearer a b', 'Bearer, Bearer x', 'Bearer x, Basic y'),
        fieldText(200),
        fieldText(120).map((s) => `Bearer ${s}`),
        fc.string({ unit: 'grapheme', maxLength: 40 }).map((s) => `Bearer ${utf8Bytes(s)}`),
        fc.string({ unit: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 40 }).map((s) => `Bearer ${s}`),
      )
      .map((value) => ({ t: 'free' as const, value })),
  },
  {
    weight: 2,
    arbitrary: fc.record({ t: fc.constant('segments' as const), scheme: schemeRecipe, segments: fc.array(fc.oneof({ weight: 4, arbitrary: segment(60) }, { weight: 1, arbitrary: fc.constantFrom('eyJhbGciOiJub25lIn0', 'eyJhbGciOiJSUzI1NiJ9', 'e30', 'bnVsbA', 'W10') }), { minLength: 1, maxLength: 5 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('long' as const),
      scheme: schemeRecipe,
      // The default --max-header-bytes is 16 KiB for the whole block: stay under it (over it is the 431 property of the other suite).
      length: fc.integer({ min: 1_000, max: 14_000 }),
      chunk: fc.oneof(fc.string({ unit: fc.constantFrom(...TOKEN68), minLength: 1, maxLength: 64 }), fieldText(32).filter((s) => s !== '')),
      jwt: fc.boolean(),
      pick: fc.nat(),
    }),
  },
);

/** Values made from real tokens: valid ones, and real ones taken apart, re-headed, re-claimed, cut and padded. */
export const derivedAuthorization: fc.Arbitrary<AuthRecipe> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ t: fc.constant('valid' as const), scheme: goodScheme, pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('pieces' as const), scheme: schemeRecipe, pieces: fc.array(fc.record({ pick: fc.nat(), seg: fc.nat({ max: 2 }) }), { minLength: 1, maxLength: 5 }) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('header' as const), scheme: schemeRecipe, pick: fc.nat(), swap: headerSwap, emptySignature: fc.boolean() }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('claims' as const), scheme: schemeRecipe, pick: fc.nat(), edits: fc.array(claimEdit, { minLength: 1, maxLength: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('truncated' as const), scheme: schemeRecipe, pick: fc.nat(), keep: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('junk' as const), scheme: schemeRecipe, pick: fc.nat(), where: fc.constantFrom('prefix' as const, 'suffix' as const, 'suffix' as const, 'inside' as const), at: fc.nat(), junk }) },
);

/** What the gateway owes a value. */
export const Expect = {
  /** A real token, a Bearer scheme: accepted on the route it was minted for, refused (`audience`) on any other. */
  real: 'real',
  refused: 'refused',
  /** Refused, and for the reason `signature`: a real header and signature over claims nobody signed. */
  refusedSignature: 'refused_signature',
} as const;
export type Expect = (typeof Expect)[keyof typeof Expect];

/** One real access token of the bank: minted by `clientId` for `route`'s resource. */
export interface BankToken {
  readonly token: string;
  readonly route: RouteName;
  readonly clientId: string;
}

export interface MaterializedAuth {
  /** The `Authorization` value on the wire (a byte string). */
  readonly value: string;
  /** The credential part, what must never be logged. */
  readonly credential: string;
  readonly expect: Expect;
  /** With `Expect.real`: the bank's token it is. */
  readonly real?: BankToken;
}

/** Materializes a recipe against the bank of real tokens (each `header.payload.signature`). */
export function materializeAuth(r: AuthRecipe, bank: readonly BankToken[]): MaterializedAuth {
  const tokens = bank.map((b) => b.token);
  const real = (pick: number): string[] => tokens[pick % tokens.length]!.split('.');
  const judged = (scheme: SchemeRecipe, credential: string, forged = false): MaterializedAuth => {
    const value = byteString(`${scheme.text}${credential}`);
    if (!scheme.ok) return { value, credential, expect: Expect.refused };
    const token = bank.find((b) => b.token === credential);
    if (token !== undefined) return { value, credential, expect: Expect.real, real: token };
    // A real token plus base64 padding (`==`) decodes to the same signature, but compact JWS has none (RFC 7515 section 2): refused as malformed.
    return { value, credential, expect: forged ? Expect.refusedSignature : Expect.refused };
  };
  switch (r.t) {
    case 'free':
      return { value: byteString(r.value), credential: r.value.replace(/^\S*\s+/, ''), expect: Expect.refused };
    case 'segments':
      return judged(r.scheme, r.segments.join('.'));
    case 'long': {
      const body = r.chunk.repeat(Math.ceil(r.length / r.chunk.length)).slice(0, r.length);
      const [h, , s] = real(r.pick);
      // A real header and signature around a payload cut to keep the whole credential at `length` characters.
      return judged(r.scheme, r.jwt ? `${h}.${b64url(body).slice(0, Math.max(1, r.length - h!.length - s!.length - 2))}.${s}` : body);
    }
    case 'valid':
      return judged(r.scheme, tokens[r.pick % tokens.length]!);
    case 'pieces':
      return judged(r.scheme, r.pieces.map((p) => real(p.pick)[p.seg]!).join('.'));
    case 'header': {
      const [h, p, s] = real(r.pick);
      return judged(r.scheme, `${swapHeader(h!, r.swap)}.${p}.${r.emptySignature ? '' : s}`);
    }
    case 'claims': {
      const [h, p, s] = real(r.pick);
      return judged(r.scheme, `${h}.${editClaims(p!, r.edits)}.${s}`, true);
    }
    case 'truncated': {
      const [h, p, s] = real(r.pick);
      return judged(r.scheme, `${h}.${p}.${s!.slice(0, r.keep % s!.length)}`);
    }
    case 'junk': {
      const token = tokens[r.pick % tokens.length]!;
      const at = r.at % (token.length + 1);
      const credential = r.where === 'prefix' ? `${r.junk}${token}` : r.where === 'suffix' ? `${token}${r.junk}` : `${token.slice(0, at)}${r.junk}${token.slice(at)}`;
      return judged(r.scheme, credential);
    }
  }
}

function b64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}

function decode(segmentText: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(segmentText, 'base64url').toString('utf8')) as Record<string, unknown>;
}

function swapHeader(h: string, swap: HeaderSwap): string {
  const header = decode(h);
  switch (swap.t) {
    case 'set':
      return b64url(JSON.stringify({ ...header, [swap.name]: swap.value }));
    case 'drop': {
      const { [swap.name]: _dropped, ...rest } = header;
      return b64url(JSON.stringify(rest));
    }
    case 'huge-kid': {
      // `length` is in bytes of JSON: 'é' takes 2, '\u0000' 6; the header block must stay under the gateway's 16 KiB.
      const bytesPerChar = Buffer.byteLength(JSON.stringify(swap.char)) - 2;
      return b64url(JSON.stringify({ ...header, kid: swap.char.repeat(Math.floor(swap.length / bytesPerChar)) }));
    }
    case 'not-json':
      return b64url(swap.text);
  }
}

function editClaims(p: string, edits: readonly ClaimEdit[]): string {
  let claims = decode(p);
  let spaces = false;
  for (const e of edits) {
    switch (e.t) {
      case 'set':
        claims = { ...claims, [e.name]: e.value };
        break;
      case 'delete': {
        const { [e.name]: _deleted, ...rest } = claims;
        claims = rest;
        break;
      }
      case 'reorder':
        claims = Object.fromEntries(Object.entries(claims).reverse());
        break;
      case 'spaces':
        spaces = true;
        break;
    }
  }
  return b64url(JSON.stringify(claims, null, spaces ? 1 : undefined));
}
