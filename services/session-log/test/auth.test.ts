import { describe, expect, it } from 'vitest';
import { Metadata } from '@grpc/grpc-js';
import { Authenticator, parseTokens } from '@tether/session-log-service';

const md = (authorization?: string): Metadata => {
  const m = new Metadata();
  if (authorization !== undefined) m.set('authorization', authorization);
  return m;
};

describe('bearer tokens', () => {
  it('names callers by token name, or by a digest prefix for bare secrets; refuses short secrets', () => {
    const entries = parseTokens(['gateway:0123456789abcdef', ' fedcba9876543210fedcba ', '']);
    expect(entries.map((e) => e.name)).toEqual(['gateway', expect.stringMatching(/^token-[0-9a-f]{8}$/)]);
    expect(entries.every((e) => e.digest.length === 32)).toBe(true);
    expect(() => parseTokens(['short'])).toThrow(/at least 16 characters/);
    expect(() => parseTokens(['gw:short'])).toThrow(/token 'gw'/);
  });

  it('accepts exactly the configured tokens; anything else is no caller', () => {
    const auth = new Authenticator(parseTokens(['a:aaaaaaaaaaaaaaaa', 'b:bbbbbbbbbbbbbbbb']), false);
    expect(auth.callerOf(md('Bearer aaaaaaaaaaaaaaaa'), {})).toBe('a');
    expect(auth.callerOf(md('bearer   bbbbbbbbbbbbbbbb'), {})).toBe('b');
    for (const bad of [undefined, 'Bearer aaaaaaaaaaaaaaab', 'Bearer aaaaaaaaaaaaaaaa extra', 'Basic YTpi', 'Bearer ', 'aaaaaaaaaaaaaaaa']) {
      expect(auth.callerOf(md(bad), {})).toBeUndefined();
    }
  });

  it('without tokens or mTLS everyone is anonymous; a presented token is still checked', () => {
    const open = new Authenticator([], false);
    expect(open.callerOf(md(), {})).toBe('anonymous');
    expect(open.callerOf(md('Bearer whatever-it-is-123'), {})).toBeUndefined();
  });

  it('with mTLS, a verified certificate names the caller by subject CN', () => {
    const mtls = new Authenticator([], true);
    const cert = { subject: { CN: 'gateway-a' }, fingerprint256: 'AA:BB' } as never;
    expect(mtls.callerOf(md(), { sslPeerCertificate: cert })).toBe('cert:gateway-a');
    expect(mtls.callerOf(md(), {})).toBeUndefined();
  });
});
