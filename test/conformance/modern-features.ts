import { randomBytes } from 'node:crypto';
import {
  CLIENT_CAPABILITIES_META_KEY,
  completable,
  createRequestStateCodec,
  fromJsonSchema,
  InMemoryServerEventBus,
  inputRequired,
  inputResponse,
  McpServer,
  ResourceTemplate,
} from '@modelcontextprotocol/server';
import type { CallToolResult, ClientCapabilities, InputRequest, InputRequiredResult, InputRequests, JsonSchemaType, RequestStateCodec, ServerContext, ServerEventBus } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { PNG_BASE64, WAV_BASE64 } from './features.js';

// What the 2026-07-28 server scenarios of @modelcontextprotocol/conformance
// 0.2.0-alpha.12 call, on an SDK v2 server: the same content fixtures as
// features.ts (the 2025 run), plus the stateless (SEP-2575) diagnostic tools
// and the multi-round-trip (SEP-2322) ones. Each scenario's description names
// what it needs (`conformance list --server --spec-version 2026-07-28`, then
// the scenario's `description` in the package's dist).


/** SEP-1613 and SEP-2106: listed verbatim, so every keyword must survive (the gateway included). */
const JSON_SCHEMA_2020_12_INPUT = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
} as const;

/** SEP-2243: a tool whose `region` argument travels as `Mcp-Param-Region` too, checked against the body. */
const CUSTOM_HEADER_INPUT = {
  type: 'object',
  properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
  required: ['region'],
} as const;

const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });
const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));
const noArgs = z.object({});

const askName = (message: string) =>
  inputRequired.elicit({ message, requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } });

/** What a retried request answered for `key`: the accepted form content, else undefined. */
function accepted(ctx: ServerContext, key: string): Record<string, unknown> | undefined {
  const view = inputResponse(ctx.mcpReq.inputResponses, key);
  return view.kind === 'elicit' && view.action === 'accept' ? (view.content ?? {}) : undefined;
}

function clientCapabilities(ctx: ServerContext): ClientCapabilities {
  const envelope = ctx.mcpReq.envelope as Record<string, unknown> | undefined;
  return (envelope?.[CLIENT_CAPABILITIES_META_KEY] ?? {}) as ClientCapabilities;
}

/** State shared by every per-request server of one upstream: the listen bus and the requestState key. */
export interface ModernFixtures {
  /** Pass to `createMcpHandler` (`handler.bus`): the trigger tools publish on it. */
  readonly bus: ServerEventBus;
  /** Builds one request's server. */
  createServer(): McpServer;
}

/**
 * The fixtures of the 2026-07-28 scenarios. `requestState` is HMAC-sealed
 * (the SDK's codec) with a key of this upstream, so a tampered state is
 * refused before the handler runs (input-required-result-tampered-state).
 */
export function createModernFixtures(): ModernFixtures {
  const bus = new InMemoryServerEventBus();
  const state: StateCodec = createRequestStateCodec({ key: randomBytes(32) });
  return { bus, createServer: () => createModernServer(bus, state) };
}

/** What a sealed `requestState` carries: the round it was minted for. */
type StateCodec = RequestStateCodec<{ readonly round: number }>;

type ToolReturn = CallToolResult | InputRequiredResult;

function createModernServer(bus: ServerEventBus, state: StateCodec): McpServer {
  const server = new McpServer(
    { name: 'tether-conformance-modern-upstream', version: '0.0.0' },
    {
      capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: {}, logging: {}, completions: {} },
      requestState: { verify: state.verify },
    },
  );
  const tool = (name: string, description: string, run: (args: Record<string, unknown>, ctx: ServerContext) => ToolReturn | Promise<ToolReturn>, inputSchema: z.ZodType | ReturnType<typeof fromJsonSchema> = noArgs) =>
    server.registerTool(name, { description, inputSchema }, (args: unknown, ctx: ServerContext) => run(args as Record<string, unknown>, ctx));

  // Content (tools-call-*). test_simple_text comes first: http-header-validation calls the first listed tool with no arguments.
  tool('test_simple_text', 'Returns simple text.', () => text('This is a simple text response for testing.'));
  tool('test_image_content', 'Returns a PNG image.', () => ({ content: [{ type: 'image', data: PNG_BASE64, mimeType: 'image/png' }] }));
  tool('test_audio_content', 'Returns WAV audio.', () => ({ content: [{ type: 'audio', data: WAV_BASE64, mimeType: 'audio/wav' }] }));
  tool('test_embedded_resource', 'Returns an embedded text resource.', () => ({
    content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }],
  }));
  tool('test_multiple_content_types', 'Returns text, an image and an embedded resource.', () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG_BASE64, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } },
    ],
  }));
  tool('test_error_handling', 'Always fails (isError: true).', () => ({ isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }));
  tool('test_tool_with_progress', 'Reports progress 0, 50 and 100 of 100, 50 ms apart.', async (_args, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    for (const [i, progress] of [0, 50, 100].entries()) {
      if (i > 0) await pause(50);
      if (progressToken !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress, total: 100 } });
    }
    return text(`progress reported for token ${String(progressToken)}`);
  });
  tool('json_schema_2020_12_tool', 'Has an input schema with JSON Schema 2020-12 keywords (SEP-1613, SEP-2106).', (args) => text(`called with ${JSON.stringify(args)}`), fromJsonSchema(JSON_SCHEMA_2020_12_INPUT as unknown as JsonSchemaType));
  tool('test_custom_header', 'Echoes region, which also travels as Mcp-Param-Region (SEP-2243).', (args) => text(`region ${String(args['region'])}`), fromJsonSchema(CUSTOM_HEADER_INPUT as unknown as JsonSchemaType));

  // server-stateless (SEP-2575) diagnostics.
  // Returns a sampling input request: the SDK's seam refuses it with -32021 (HTTP 400) when the client did not declare sampling.
  tool('test_missing_capability', 'Needs the sampling capability: asks the client model a question.', (_args, ctx) =>
    inputResponse(ctx.mcpReq.inputResponses, 'question').kind === 'sampling'
      ? text('sampled')
      : inputRequired({ inputRequests: { question: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'Say hello' } }], maxTokens: 10 }) } }),
  );
  tool('test_streaming_elicitation', 'Asks for a name through an input-required result (never a request on the stream).', (_args, ctx) =>
    accepted(ctx, 'user_name') === undefined ? inputRequired({ inputRequests: { user_name: askName('What is your name?') } }) : text('thanks'),
  );
  tool('test_logging_tool', 'Logs at info: sent only when the request set a log level.', async (_args, ctx) => {
    await ctx.mcpReq.log('info', 'test_logging_tool ran');
    return text('logged');
  });
  tool('test_trigger_tool_change', 'Announces a tools/list change on the listen streams.', () => {
    bus.publish({ kind: 'tools_list_changed' });
    return text('tools changed');
  });
  tool('test_trigger_prompt_change', 'Announces a prompts/list change on the listen streams.', () => {
    bus.publish({ kind: 'prompts_list_changed' });
    return text('prompts changed');
  });

  // Multi-round-trip (SEP-2322).
  tool('test_input_required_result_elicitation', 'Asks for a name, then greets.', (_args, ctx) => {
    const name = accepted(ctx, 'user_name')?.['name'];
    return typeof name === 'string' ? text(`Hello, ${name}!`) : inputRequired({ inputRequests: { user_name: askName('What is your name?') } });
  });
  tool('test_input_required_result_sampling', 'Asks the client model a question, then answers with its reply.', (_args, ctx) => {
    const view = inputResponse(ctx.mcpReq.inputResponses, 'capital_question');
    if (view.kind !== 'sampling') {
      return inputRequired({
        inputRequests: { capital_question: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 100 }) },
      });
    }
    const content = view.result.content;
    return text(`The model said: ${!Array.isArray(content) && content.type === 'text' ? content.text : JSON.stringify(content)}`);
  });
  tool('test_input_required_result_list_roots', 'Asks for the client roots, then lists them.', (_args, ctx) => {
    const view = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
    if (view.kind !== 'roots') return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
    return text(`Roots: ${view.roots.map((r) => r.uri).join(', ')}`);
  });
  tool('test_input_required_result_request_state', 'Asks for confirmation with a sealed requestState, then says state-ok.', async (_args, ctx) => {
    const confirmed = accepted(ctx, 'confirm');
    if (confirmed === undefined || ctx.mcpReq.requestState<{ round: number }>()?.round !== 1) {
      return inputRequired({
        inputRequests: { confirm: inputRequired.elicit({ message: 'Please confirm', requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } }) },
        requestState: await state.mint({ round: 1 }),
      });
    }
    return text(`state-ok: confirmed ${JSON.stringify(confirmed)}`);
  });
  tool('test_input_required_result_multiple_inputs', 'Asks for a name, a greeting and the roots at once.', async (_args, ctx) => {
    const responses = ctx.mcpReq.inputResponses;
    const kinds = ['user_name', 'greeting', 'client_roots'].map((key) => inputResponse(responses, key).kind);
    if (kinds.includes('missing') || ctx.mcpReq.requestState<{ round: number }>()?.round !== 1) {
      const requests: InputRequests = {
        user_name: askName('What is your name?'),
        greeting: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 }),
        client_roots: inputRequired.listRoots(),
      };
      return inputRequired({ inputRequests: requests, requestState: await state.mint({ round: 1 }) });
    }
    return text(`received ${kinds.join(', ')}`);
  });
  tool('test_input_required_result_multi_round', 'Asks for a name, then a colour, then answers.', async (_args, ctx) => {
    const round = ctx.mcpReq.requestState<{ round: number }>()?.round ?? 0;
    if (round === 1 && accepted(ctx, 'step1') !== undefined) {
      return inputRequired({
        inputRequests: {
          step2: inputRequired.elicit({ message: 'Step 2: What is your favorite color?', requestedSchema: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] } }),
        },
        requestState: await state.mint({ round: 2 }),
      });
    }
    if (round === 2 && accepted(ctx, 'step2') !== undefined) return text(`done: ${JSON.stringify(accepted(ctx, 'step2'))}`);
    return inputRequired({ inputRequests: { step1: askName('Step 1: What is your name?') }, requestState: await state.mint({ round: 1 }) });
  });
  tool('test_input_required_result_tampered_state', 'Seals its requestState: a tampered one is refused with -32602.', async (_args, ctx) => {
    if (accepted(ctx, 'confirm') !== undefined && ctx.mcpReq.requestState<{ round: number }>()?.round === 1) return text('state verified');
    return inputRequired({
      inputRequests: { confirm: inputRequired.elicit({ message: 'Please confirm', requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] } }) },
      requestState: await state.mint({ round: 1 }),
    });
  });
  tool('test_input_required_result_capabilities', 'Asks only for what the client declared (elicitation, sampling, roots).', (_args, ctx) => {
    const caps = clientCapabilities(ctx);
    const requests: Record<string, InputRequest> = {};
    if (caps.elicitation !== undefined) requests['user_name'] = askName('What is your name?');
    if (caps.sampling !== undefined) requests['greeting'] = inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'Generate a greeting' } }], maxTokens: 50 });
    if (caps.roots !== undefined) requests['client_roots'] = inputRequired.listRoots();
    if (Object.keys(requests).length === 0 || ctx.mcpReq.inputResponses !== undefined) return text('nothing to ask');
    return inputRequired({ inputRequests: requests });
  });

  // Resources (resources-*, caching, sep-2164).
  const staticResource = (name: string, uri: string, mimeType: string, body: { text: string } | { blob: string }) =>
    server.registerResource(name, uri, { description: `${name} (conformance)`, mimeType }, async () => ({ contents: [{ uri, mimeType, ...body }] }));
  staticResource('static-text', 'test://static-text', 'text/plain', { text: 'This is the content of the static text resource.' });
  staticResource('static-binary', 'test://static-binary', 'image/png', { blob: PNG_BASE64 });
  server.registerResource(
    'template',
    new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'A template with an id parameter', mimeType: 'application/json' },
    async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${String(id)}` }) }] }),
  );

  // Prompts (prompts-*, completion-complete, input-required-result-non-tool-request).
  server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }],
  }));
  server.registerPrompt(
    'test_prompt_with_arguments',
    {
      description: 'A prompt with two required arguments',
      argsSchema: z.object({
        arg1: completable(z.string().describe('First test argument'), (value) => ['paris', 'park', 'party'].filter((v) => v.startsWith(value))),
        arg2: z.string().describe('Second test argument'),
      }),
    },
    ({ arg1, arg2 }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }] }),
  );
  server.registerPrompt(
    'test_prompt_with_embedded_resource',
    { description: 'A prompt that embeds a resource', argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') }) },
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
  server.registerPrompt('test_input_required_result_prompt', { description: 'Asks for context before it renders' }, (ctx) => {
    const context = accepted(ctx, 'user_context')?.['context'];
    if (typeof context !== 'string') {
      return inputRequired({
        inputRequests: {
          user_context: inputRequired.elicit({ message: 'What context should the prompt use?', requestedSchema: { type: 'object', properties: { context: { type: 'string' } }, required: ['context'] } }),
        },
      });
    }
    return { messages: [{ role: 'user', content: { type: 'text', text: `Use this context: ${context}` } }] };
  });
  return server;
}
