/**
 * An SDK v2 upstream for the chaos harness: the SDK's own HTTP entry,
 * `createMcpHandler` (the test kit's `startModernUpstream`), stateless in
 * both eras: 2026-07-28 requests per request, and 2025-era traffic
 * (`initialize`, then calls with the gateway's session) answered without
 * a session of its own, its GET with 405. No event ids, so a stream whose
 * gateway died is ended `abandoned`, never resumed upstream. Its own
 * process, so `upstream_restart` can SIGKILL it and start it again on the
 * same port (it has nothing to forget). One JSON ready line with the port.
 *
 * Tool: `stream {count, delayMs}` (`tools.ts`, `V2_TOOL`): progress
 * 1..count on the request's token, `delayMs` apart, then `streamed <count>`.
 *
 * Flags: `--port N` (default any; a restart passes its old port).
 */
import { McpServer } from '@modelcontextprotocol/server';
import { startModernUpstream } from '@tether/testing';
import { z } from 'zod';
import { stopWith } from '../shared/stop-with.js';

function createServer(): McpServer {
  const server = new McpServer({ name: 'tether-chaos-v2-upstream', version: '0.0.0' });
  server.registerTool('stream', { description: 'Sends count progress notifications on this request, delayMs apart, then answers.', inputSchema: z.object({ count: z.number().int().min(0), delayMs: z.number().int().min(0) }) }, async ({ count, delayMs }, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    for (let i = 1; i <= count; i += 1) {
      if (progressToken !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: i, total: count } });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
    return { content: [{ type: 'text', text: `streamed ${count}` }] };
  });
  return server;
}

const args = process.argv.slice(2);
const portAt = args.indexOf('--port');
const upstream = await startModernUpstream({ createServer, port: portAt === -1 ? 0 : Number(args[portAt + 1]) });
process.stdout.write(`${JSON.stringify({ msg: 'listening', port: Number(new URL(upstream.origin).port), url: upstream.url })}\n`);

stopWith(() => upstream.close());
