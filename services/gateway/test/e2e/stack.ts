import { fileURLToPath } from 'node:url';
import { startMcpUpstream, startNatsServer, startRoundRobinProxy, startServiceProcess } from '@tether/testing';
import type { McpUpstream, NatsServer, RoundRobinProxy, ServiceProcess } from '@tether/testing';
import { namespaceNames } from '@tether/session-log';

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
let counter = 0;

export interface GatewayProcess {
  readonly name: string;
  readonly process: ServiceProcess;
  /** `http://127.0.0.1:<port>`: what the balancer targets. */
  readonly origin: string;
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
}

/** Real processes: nats-server, an SDK upstream, N gateway processes, and a balancer that rotates every request. */
export interface Stack {
  readonly mode: LogMode;
  readonly nats: NatsServer;
  /** The namespace of the stack's log (`--namespace`, unique per stack). */
  readonly namespace: string;
  /** The JetStream stream holding the log (derived from the namespace). */
  readonly logStream: string;
  /** The log flags every gateway gets: `--nats … --namespace …` and the log settings, or `--log grpc://… --log-token …`. */
  readonly logFlags: readonly string[];
  readonly upstream: McpUpstream;
  readonly gateways: GatewayProcess[];
  readonly proxy: RoundRobinProxy;
  /** The balanced MCP endpoint. */
  readonly url: string;
  /** Starts one more gateway with the stack's settings (after a kill, say). */
  addGateway(): Promise<GatewayProcess>;
  /** The gateway that served the most recent request matching `match`. */
  gatewayOf(match: Parameters<RoundRobinProxy['lastTargetOf']>[0]): GatewayProcess | undefined;
  /** RSS of a gateway process in KiB (from /proc). */
  rssKiB(gateway: GatewayProcess): Promise<number>;
  teardown(): Promise<void>;
}

export type LogMode = 'nats' | 'grpc';

export interface StackOptions {
  readonly gateways?: number;
  readonly eventStore?: boolean;
  /** Extra gateway flags. */
  readonly args?: readonly string[];
  /** Log settings (`--log-max-msgs-per-stream 20`, …), given to whichever process owns the log. */
  readonly logSettings?: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  /**
   * `nats`: gateways use JetStream in-process. `grpc`: a session-log service
   * owns the log and gateways reach it with `--log grpc://` (no NATS at all).
   * Default `TETHER_E2E_LOG`, else `nats`: the suite runs in both modes.
   */
  readonly log?: LogMode;
}

const SESSION_LOG_MAIN = fileURLToPath(new URL('../../../session-log/dist/main.js', import.meta.url));
const E2E_TOKEN = 'e2e-gateways:e2e-secret-token';

export async function startStack(options: StackOptions = {}): Promise<Stack> {
  counter += 1;
  const namespace = `e2e_${process.pid}_${counter}`;
  const mode: LogMode = options.log ?? (process.env.TETHER_E2E_LOG === 'grpc' ? 'grpc' : 'nats');
  const nats = await startNatsServer();
  const upstream = await startMcpUpstream({ eventStore: options.eventStore ?? true });
  const logSettings = ['--namespace', namespace, ...(options.logSettings ?? [])];
  let service: ServiceProcess | undefined;
  if (mode === 'grpc') {
    service = await startServiceProcess({
      name: 'session-log',
      command: process.execPath,
      args: [SESSION_LOG_MAIN, '--port', '0', '--nats', nats.url, '--token', E2E_TOKEN, ...logSettings],
      readyLine: (json) => json.msg === 'listening',
    });
  }
  const logFlags =
    service === undefined ? ['--nats', nats.url, ...logSettings] : ['--log', `grpc://127.0.0.1:${service.port}`, '--log-token', E2E_TOKEN.split(':')[1]!];
  const gateways: GatewayProcess[] = [];
  let index = 0;
  const addGateway = async (): Promise<GatewayProcess> => {
    index += 1;
    const name = `gateway-${index}`;
    const proc = await startServiceProcess({
      name,
      command: process.execPath,
      args: [
        MAIN,
        ...['--port', '0', ...logFlags, '--upstream', upstream.url, '--instance-id', name],
        ...['--heartbeat', '1s', '--drain-timeout', '5s'],
        ...(options.args ?? []),
      ],
      env: { ...options.env },
      readyLine: (json) => json.msg === 'listening',
    });
    const origin = `http://127.0.0.1:${proc.port}`;
    const gateway = { name, process: proc, origin, url: `${origin}/mcp` };
    gateways.push(gateway);
    return gateway;
  };
  for (let i = 0; i < (options.gateways ?? 3); i += 1) await addGateway();
  const proxy = await startRoundRobinProxy(gateways.map((g) => g.origin));
  return {
    mode,
    nats,
    namespace,
    logStream: namespaceNames(namespace).streamName,
    logFlags,
    upstream,
    gateways,
    proxy,
    url: `${proxy.url}/mcp`,
    addGateway,
    gatewayOf(match) {
      const target = proxy.lastTargetOf(match);
      return gateways.find((g) => g.origin === target);
    },
    async rssKiB(gateway) {
      const { readFile } = await import('node:fs/promises');
      const status = await readFile(`/proc/${gateway.process.pid}/status`, 'utf8');
      return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
    },
    async teardown() {
      await proxy.close();
      await Promise.all(gateways.map((g) => g.process.stop('SIGKILL' as NodeJS.Signals, 2_000).catch(() => undefined)));
      await service?.stop('SIGKILL' as NodeJS.Signals, 2_000).catch(() => undefined);
      await upstream.close();
      await nats.cleanup();
    },
  };
}
