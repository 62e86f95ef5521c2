import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { completable } from '@modelcontextprotocol/sdk/server/completable.js';
import {
  CreateMessageResultSchema,
  ElicitResultSchema,
  ListToolsRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type CallToolResult,
  type ElicitRequestFormParams,
  type ServerNotification,
  type ServerRequest,
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { z } from 'zod';

// What the server scenarios of @modelcontextprotocol/conformance call, by the
// names and payloads their descriptions require (`conformance list --server`;
// each scenario's description states its contract).

/** A 1x1 PNG. */
export const PNG_BASE64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
/** A RIFF/WAVE header with two bytes of silence. */
export const WAV_BASE64 = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';

/** SEP-1613: listed verbatim, so `$schema`, `$defs` and `additionalProperties` must survive (the gateway included). */
const JSON_SCHEMA_2020_12_TOOL = 'json_schema_2020_12_tool';
const JSON_SCHEMA_2020_12_INPUT: Tool['inputSchema'] = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
  additionalProperties: false,
};

const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });
const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

type Shape = Record<string, z.ZodType>;
type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

interface ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly shape: Shape;
  /** What tools/list shows; default: the JSON Schema of `shape`. */
  readonly listedSchema?: Tool['inputSchema'];
  readonly run: (args: Record<string, unknown>, extra: ToolExtra) => Promise<CallToolResult>;
}

/** Asks the client to fill a form, on the stream of the tool call (`extra.sendRequest` relates it). */
async function elicit(extra: ToolExtra, params: ElicitRequestFormParams): Promise<CallToolResult> {
  const result = await extra.sendRequest({ method: 'elicitation/create', params }, ElicitResultSchema);
  return text(`Elicitation completed: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`);
}

const TOOLS: readonly ToolSpec[] = [
  { name: 'test_simple_text', description: 'Returns simple text.', shape: {}, run: async () => text('This is a simple text response for testing.') },
  { name: 'test_image_content', description: 'Returns a PNG image.', shape: {}, run: async () => ({ content: [{ type: 'image', data: PNG_BASE64, mimeType: 'image/png' }] }) },
  { name: 'test_audio_content', description: 'Returns WAV audio.', shape: {}, run: async () => ({ content: [{ type: 'audio', data: WAV_BASE64, mimeType: 'audio/wav' }] }) },
  {
    name: 'test_embedded_resource',
    description: 'Returns an embedded text resource.',
    shape: {},
    run: async () => ({ content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] }),
  },
  {
    name: 'test_multiple_content_types',
    description: 'Returns text, an image and an embedded resource.',
    shape: {},
    run: async () => ({
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG_BASE64, mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } },
      ],
    }),
  },
  {
    name: 'test_tool_with_logging',
    description: 'Sends three info log notifications on its own stream, 50 ms apart.',
    shape: {},
    run: async (_args, extra) => {
      for (const [i, data] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
        if (i > 0) await pause(50);
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', logger: 'conformance-upstream', data } });
      }
      return text('Tool with logging executed successfully');
    },
  },
  {
    name: 'test_tool_with_progress',
    description: 'Reports progress 0, 50 and 100 of 100, 50 ms apart.',
    shape: {},
    run: async (_args, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (const [i, progress] of [0, 50, 100].entries()) {
        if (i > 0) await pause(50);
        if (progressToken !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, total: 100 } });
      }
      return text(`progress reported for token ${String(progressToken)}`);
    },
  },
  {
    name: 'test_error_handling',
    description: 'Always fails (isError: true).',
    shape: {},
    run: async () => ({ isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }),
  },
  {
    name: 'test_reconnection',
    description: 'Closes its SSE stream mid-call (SEP-1699), then answers: the client must resume with Last-Event-ID.',
    shape: {},
    run: async (_args, extra) => {
      // The SDK offers closeSSEStream only when the client can resume (protocol
      // >= 2025-11-25, so it got a priming event with an id); otherwise the
      // answer simply stays on the POST stream.
      extra.closeSSEStream?.();
      await pause(100);
      return text('Reconnection test completed successfully.');
    },
  },
  {
    name: 'test_sampling',
    description: 'Asks the client for an LLM completion of prompt.',
    shape: { prompt: z.string().describe('The prompt to send to the LLM') },
    run: async (args, extra) => {
      const prompt = String(args['prompt']);
      const result = await extra.sendRequest(
        { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 } },
        CreateMessageResultSchema,
      );
      const reply = !Array.isArray(result.content) && result.content.type === 'text' ? result.content.text : JSON.stringify(result.content);
      return text(`LLM response: ${reply}`);
    },
  },
  {
    name: 'test_elicitation',
    description: 'Asks the user for a username and an email.',
    shape: { message: z.string().describe('The message to show the user') },
    run: (args, extra) =>
      elicit(extra, {
        message: String(args['message']),
        requestedSchema: {
          type: 'object',
          properties: { username: { type: 'string', description: "User's response" }, email: { type: 'string', description: "User's email address" } },
          required: ['username', 'email'],
        },
      }),
  },
  {
    name: 'test_elicitation_sep1034_defaults',
    description: 'Elicits a form whose primitive fields all have defaults (SEP-1034).',
    shape: {},
    run: (_args, extra) =>
      elicit(extra, {
        message: 'Please review and update the form fields with defaults',
        requestedSchema: {
          type: 'object',
          properties: {
            name: { type: 'string', description: 'User name', default: 'John Doe' },
            age: { type: 'integer', description: 'User age', default: 30 },
            score: { type: 'number', description: 'User score', default: 95.5 },
            status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
            verified: { type: 'boolean', description: 'Verification status', default: true },
          },
        },
      }),
  },
  {
    name: 'test_elicitation_sep1330_enums',
    description: 'Elicits a form with the five enum variants of SEP-1330.',
    shape: {},
    run: (_args, extra) =>
      elicit(extra, {
        message: 'Please select options from the enum fields',
        requestedSchema: {
          type: 'object',
          properties: {
            untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
            titledSingle: {
              type: 'string',
              oneOf: [
                { const: 'value1', title: 'First Option' },
                { const: 'value2', title: 'Second Option' },
                { const: 'value3', title: 'Third Option' },
              ],
            },
            legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
            untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
            titledMulti: {
              type: 'array',
              items: {
                anyOf: [
                  { const: 'value1', title: 'First Choice' },
                  { const: 'value2', title: 'Second Choice' },
                  { const: 'value3', title: 'Third Choice' },
                ],
              },
            },
          },
        },
      }),
  },
  {
    name: JSON_SCHEMA_2020_12_TOOL,
    description: 'Has an input schema with JSON Schema 2020-12 keywords (SEP-1613).',
    shape: { name: z.string().optional(), address: z.object({ street: z.string().optional(), city: z.string().optional() }).optional() },
    listedSchema: JSON_SCHEMA_2020_12_INPUT,
    run: async (args) => text(`called with ${JSON.stringify(args)}`),
  },
];

/** One session's server: every tool, resource and prompt the scenarios call. */
export function createConformanceServer(): McpServer {
  const server = new McpServer(
    { name: 'tether-conformance-upstream', version: '0.0.0' },
    // `logging` makes the SDK answer logging/setLevel; `subscribe` allows the handlers below.
    { capabilities: { logging: {}, resources: { subscribe: true } } },
  );

  for (const tool of TOOLS) {
    server.registerTool(tool.name, { description: tool.description, inputSchema: tool.shape }, (args: Record<string, unknown>, extra: ToolExtra) => tool.run(args, extra));
  }
  // The SDK lists a tool's schema as draft-07 JSON Schema converted from zod;
  // SEP-1613 wants one listed verbatim. Calls still go through the SDK's handler.
  const listed: Tool[] = TOOLS.map((t) => ({
    name: t.name,
    description: t.description,
    inputSchema: t.listedSchema ?? (z.toJSONSchema(z.object(t.shape), { io: 'input' }) as Tool['inputSchema']),
  }));
  server.server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: listed }));

  const staticResource = (name: string, uri: string, mimeType: string, body: { text: string } | { blob: string }) =>
    server.registerResource(name, uri, { description: `${name} (conformance)`, mimeType }, async () => ({ contents: [{ uri, mimeType, ...body }] }));
  staticResource('static-text', 'test://static-text', 'text/plain', { text: 'This is the content of the static text resource.' });
  staticResource('static-binary', 'test://static-binary', 'image/png', { blob: PNG_BASE64 });
  staticResource('watched-resource', 'test://watched-resource', 'text/plain', { text: 'Watched resource content' });
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A template with an id parameter', mimeType: 'application/json' },
    async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${String(id)}` }) }] }),
  );
  const subscribed = new Set<string>();
  server.server.setRequestHandler(SubscribeRequestSchema, ({ params }) => {
    subscribed.add(params.uri);
    return {};
  });
  server.server.setRequestHandler(UnsubscribeRequestSchema, ({ params }) => {
    subscribed.delete(params.uri);
    return {};
  });

  server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two required arguments',
      // completable() makes the SDK answer completion/complete for arg1.
      argsSchema: { arg1: completable(z.string().describe('First test argument'), (value) => ['paris', 'park', 'party'].filter((v) => v.startsWith(value))), arg2: z.string().describe('Second test argument') },
    },
    ({ arg1, arg2 }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }] }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'A prompt that embeds a resource', argsSchema: { resourceUri: z.string().describe('URI of the resource to embed') } },
    ({ resourceUri }) => ({
      messages: [
        { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
        { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } },
      ],
    }),
  );
  server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image' }, () => ({
    messages: [
      { role: 'user', content: { type: 'image', data: PNG_BASE64, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } },
    ],
  }));
  return server;
}
