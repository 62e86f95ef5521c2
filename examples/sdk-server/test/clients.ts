import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';

export type SdkMajor = 'v1' | 'v2';

export interface CallOptions {
  onProgress?: (progress: number) => void;
  /** Resume this request's stream from a cursor (GET with `Last-Event-ID`) instead of sending it. */
  resumptionToken?: string;
  onResumptionToken?: (token: string) => void;
  signal?: AbortSignal;
}

/** The official SDK client of either major version, with the calls the tests make. */
export interface TestClient {
  readonly major: SdkMajor;
  readonly sessionId: string | undefined;
  call(name: string, args: Record<string, unknown>, options?: CallOptions): Promise<string>;
  /** Transport errors the SDK reports on `onerror` (a refused resume arrives here). */
  readonly errors: Error[];
  onError(listener: (err: Error) => void): void;
  close(): Promise<void>;
}

export interface ConnectOptions {
  authorization: string;
  /** Join an existing session instead of initializing one. */
  sessionId?: string;
}

export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((c) => c.text ?? '').join('');
}

// The default reconnection gives up after 2 failed attempts in a row; each cut is a separate disconnect.
const reconnectionOptions = { initialReconnectionDelay: 20, maxReconnectionDelay: 200, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 };

export async function connectClient(major: SdkMajor, url: string, options: ConnectOptions): Promise<TestClient> {
  const transportOptions = {
    requestInit: { headers: { authorization: options.authorization } },
    reconnectionOptions,
    ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
  };
  const errors: Error[] = [];
  const listeners: ((err: Error) => void)[] = [];
  const onerror = (err: Error): void => {
    errors.push(err);
    for (const listener of listeners) listener(err);
  };
  const common = { errors, onError: (listener: (err: Error) => void) => void listeners.push(listener) };
  if (major === 'v1') {
    const transport = new TransportV1(new URL(url), transportOptions);
    const client = new ClientV1({ name: 'sdk-example-e2e', version: '1.0.0' });
    await client.connect(transport);
    client.onerror = onerror;
    return {
      major,
      ...common,
      get sessionId() {
        return transport.sessionId;
      },
      async call(name, args, o = {}) {
        const result = await client.callTool({ name, arguments: args }, CallToolResultSchema, requestOptions(o));
        return textOf(result);
      },
      close: () => client.close(),
    };
  }
  const transport = new TransportV2(new URL(url), transportOptions);
  const client = new ClientV2({ name: 'sdk-example-e2e', version: '2.0.0' });
  await client.connect(transport);
  client.onerror = onerror;
  return {
    major,
    ...common,
    get sessionId() {
      return transport.sessionId;
    },
    async call(name, args, o = {}) {
      return textOf(await client.callTool({ name, arguments: args }, requestOptions(o)));
    },
    close: () => client.close(),
  };
}

function requestOptions(o: CallOptions) {
  const onProgress = o.onProgress;
  return {
    timeout: 120_000,
    ...(onProgress === undefined ? {} : { onprogress: (p: { progress: number }) => onProgress(p.progress) }),
    ...(o.resumptionToken === undefined ? {} : { resumptionToken: o.resumptionToken }),
    ...(o.onResumptionToken === undefined ? {} : { onresumptiontoken: o.onResumptionToken }),
    ...(o.signal === undefined ? {} : { signal: o.signal }),
  };
}

/** v1's task API (v2 2.4's client has none): create through a task-augmented call, read status and result. With `sessionId`, joins that session. */
export async function connectTaskClient(url: string, authorization: string, sessionId?: string): Promise<{ client: ClientV1; transport: TransportV1 }> {
  const transport = new TransportV1(new URL(url), { requestInit: { headers: { authorization } }, reconnectionOptions, ...(sessionId === undefined ? {} : { sessionId }) });
  const client = new ClientV1({ name: 'sdk-example-e2e-tasks', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** Calls `slow_task` as a task and returns the id from its `taskCreated` message (the stream is left there: no polling). */
export async function createTask(client: ClientV1, ms: number): Promise<string> {
  const stream = client.experimental.tasks.callToolStream({ name: 'slow_task', arguments: { ms } }, CallToolResultSchema, { task: { ttl: 60_000 } });
  for await (const message of stream) {
    if (message.type === 'taskCreated') return message.task.taskId;
    throw new Error(`expected taskCreated first, got ${message.type}`);
  }
  throw new Error('the stream ended without taskCreated');
}
