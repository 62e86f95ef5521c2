import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';

/** The tool of {@link whoamiServer}. */
export const WHOAMI = 'whoami';

/** What the upstream saw of the caller: its credentials headers, null where absent. */
export interface Seen {
  readonly authorization: string | null;
  readonly principal: string | null;
  readonly identity: string | null;
}

/**
 * An SDK server whose one tool, `whoami`, answers (as JSON text) the
 * credentials headers the upstream was called with: what the auth tests
 * read to see what each `--upstream-auth` mode sends upstream.
 */
export function whoamiServer(): McpServer {
  const server = new McpServer({ name: 'whoami', version: '0.0.0' });
  server.registerTool(WHOAMI, { description: 'the caller as the upstream sees it' }, (extra) => {
    const headers = extra.requestInfo?.headers ?? {};
    const pick = (name: string): string | null => (typeof headers[name] === 'string' ? (headers[name] as string) : null);
    const seen: Seen = { authorization: pick('authorization'), principal: pick('tether-principal'), identity: pick('tether-identity') };
    return { content: [{ type: 'text', text: JSON.stringify(seen) }] };
  });
  return server;
}
