/**
 * Random tokens that make up sessions and event ids (DESIGN §5, §9, §10).
 *
 * Epochs and stream ids use lowercase RFC 4648 base32 (`a-z2-7`): the alphabet
 * has no `-`, so it can never be confused with the event id's separator, and
 * no `0`, so a random stream id can never collide with the GET stream's `0`.
 * Session ids use base64url, which is what DESIGN §9 asks for (>= 128 bits).
 *
 * Randomness comes from `globalThis.crypto.getRandomValues`, available in
 * browsers and in Node >= 19 without an import, so this package stays
 * platform-neutral.
 */

/** The stream id of the standalone GET stream. */
export const STANDALONE_STREAM = '0';

/** Length of an epoch: 10 base32 characters, 50 random bits. */
export const EPOCH_LENGTH = 10;
/** Length of a POST response stream id: 8 base32 characters, 40 random bits. */
export const STREAM_ID_LENGTH = 8;
/** Length of a session id: 22 base64url characters, 132 random bits. */
export const SESSION_ID_LENGTH = 22;

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

const EPOCH_RE = /^[a-z2-7]{10}$/;
const STREAM_RE = /^[a-z2-7]{8}$/;
const SESSION_RE = /^[A-Za-z0-9_-]{22}$/;

/** True when `s` is exactly 10 characters of lowercase base32 (`[a-z2-7]`). */
export function isEpoch(s: string): boolean {
  return typeof s === 'string' && EPOCH_RE.test(s);
}

/** True when `s` is `'0'` (the GET stream) or exactly 8 characters of lowercase base32. */
export function isStreamId(s: string): boolean {
  return typeof s === 'string' && (s === STANDALONE_STREAM || STREAM_RE.test(s));
}

/**
 * True when `s` is exactly 22 base64url characters (`[A-Za-z0-9_-]`).
 * Any 22 such characters are accepted: a session id is an opaque token, and
 * `newSessionId()` draws every character independently (it does not encode
 * 16 bytes, so there are no non-canonical trailing bits to reject).
 */
export function isSessionId(s: string): boolean {
  return typeof s === 'string' && SESSION_RE.test(s);
}

/** A fresh epoch: 10 random base32 characters. */
export function newEpoch(): string {
  return randomToken(BASE32, EPOCH_LENGTH);
}

/** A fresh POST response stream id: 8 random base32 characters. */
export function newStreamId(): string {
  return randomToken(BASE32, STREAM_ID_LENGTH);
}

/** A fresh session id: 22 random base64url characters (132 bits, DESIGN §9 asks for >= 128). */
export function newSessionId(): string {
  return randomToken(BASE64URL, SESSION_ID_LENGTH);
}

// Both alphabets have a power-of-two size that divides 256, so masking a
// uniform random byte gives a uniform character: no modulo bias.
function randomToken(alphabet: string, length: number): string {
  const mask = alphabet.length - 1;
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(length));
  let out = '';
  for (const b of bytes) out += alphabet[b & mask];
  return out;
}
