import { describe, expect, it } from 'vitest';
import { clientPrincipalOf, identityOfAuthInfo, isTetherSdkError } from '@tether/sdk';
import type { SdkAuthInfo } from '@tether/sdk';

// Who a verified token is (issue 31): by default its subject (`extra.sub`),
// never its client id, which a public client or a Client ID Metadata
// Document URL shares among every user of an app. Client principals are an
// explicit choice (`clientPrincipalOf`).

const ISSUER = 'https://as.example.test';
const CIMD_CLIENT = 'https://app.example.test/oauth/client-metadata.json';
const base: SdkAuthInfo = { token: 'secret', clientId: CIMD_CLIENT, scopes: [] };
const request = (authorization?: string): Request => new Request('http://mcp.test/mcp', authorization === undefined ? {} : { headers: { authorization } });

function thrownBy(f: () => unknown): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  throw new Error('did not throw');
}

describe('identityOfAuthInfo (the default principal)', () => {
  it('is iss and sub from extra (no issuer is the empty one), and without a sub no identity (no_identity), never the client id', () => {
    expect(identityOfAuthInfo({ ...base, extra: { iss: ISSUER, sub: 'alice' } })).toEqual({ issuer: ISSUER, subject: 'alice' });
    expect(identityOfAuthInfo({ ...base, extra: { sub: 'alice' } })).toEqual({ issuer: '', subject: 'alice' });
    expect(identityOfAuthInfo({ ...base, extra: { iss: 7, sub: 'alice' } })).toEqual({ issuer: '', subject: 'alice' });
    for (const extra of [undefined, { iss: ISSUER }, { iss: ISSUER, sub: '' }, { iss: ISSUER, sub: 42 }]) {
      expect(isTetherSdkError(thrownBy(() => identityOfAuthInfo({ ...base, ...(extra === undefined ? {} : { extra }) })), 'no_identity')).toBe(true);
    }
  });

  it('refuses without the token or the client id in the message, and names the fix', () => {
    for (const extra of [undefined, { iss: ISSUER }]) {
      const thrown = thrownBy(() => identityOfAuthInfo({ ...base, ...(extra === undefined ? {} : { extra }) }));
      const message = String((thrown as Error).message);
      expect(message).toContain('authInfo.extra.sub');
      expect(message).toContain('clientPrincipalOf');
      expect(message).not.toContain('secret');
      expect(message).not.toContain(CIMD_CLIENT);
    }
  });
});

describe('clientPrincipalOf (client principals, chosen explicitly)', () => {
  it('is the client id under the issuer, whatever the subject', () => {
    expect(clientPrincipalOf(request(), { ...base, extra: { iss: ISSUER, sub: 'alice' } })).toEqual({ issuer: ISSUER, subject: CIMD_CLIENT });
    expect(clientPrincipalOf(request(), { ...base, extra: { iss: ISSUER, sub: 'bob' } })).toEqual({ issuer: ISSUER, subject: CIMD_CLIENT });
    expect(clientPrincipalOf(request(), base)).toEqual({ issuer: '', subject: CIMD_CLIENT });
  });

  it('is the identity a client-credentials token of that client has by default (RFC 9068: sub = client id)', () => {
    const clientCredentials: SdkAuthInfo = { token: 't', clientId: 'svc', scopes: [], extra: { iss: ISSUER, sub: 'svc' } };
    expect(clientPrincipalOf(request(), clientCredentials)).toEqual(identityOfAuthInfo(clientCredentials));
  });

  it('without a token is the Authorization value, like the default', () => {
    expect(clientPrincipalOf(request('Bearer raw'), undefined)).toBe('Bearer raw');
    expect(clientPrincipalOf(request(), undefined)).toBe('');
  });

  it('refuses a token without a client id (no_identity)', () => {
    const thrown = thrownBy(() => clientPrincipalOf(request(), { ...base, clientId: '', extra: { iss: ISSUER, sub: 'alice' } }));
    expect(isTetherSdkError(thrown, 'no_identity')).toBe(true);
    expect(String((thrown as Error).message)).not.toContain('secret');
  });
});
