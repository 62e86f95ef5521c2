import { pino } from 'pino';
import { createGateway, createLocalLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { startMcpUpstream, startNatsServer } from '@tether/testing';
import type { McpUpstream, NatsServer } from '@tether/testing';

let counter = 0;

/** A gateway in this process, on a real nats-server and a real SDK upstream. */
export interface InProcessStack {
  readonly nats: NatsServer;
  /** The test kit's SDK upstream (also started when `upstreamUrl` points elsewhere). */
  readonly upstream: McpUpstream;
  readonly gateways: Gateway[];
  readonly urls: string[];
  readonly streamName: string;
  teardown(): Promise<void>;
}

export async function startInProcessStack(
  options: { gateways?: number; eventStore?: boolean; args?: string[]; nats?: NatsServer; upstreamUrl?: string } = {},
): Promise<InProcessStack> {
  const nats = options.nats ?? (await startNatsServer());
  const upstream = await startMcpUpstream({ eventStore: options.eventStore ?? true });
  counter += 1;
  const streamName = `GW_${process.pid}_${counter}`;
  const gateways: Gateway[] = [];
  const urls: string[] = [];
  for (let i = 0; i < (options.gateways ?? 1); i += 1) {
    const config = parseConfig(
      ['--port', '0', '--nats', nats.url, '--upstream', options.upstreamUrl ?? upstream.url, '--instance-id', `gw-${i}`, '--heartbeat', '1s', ...(options.args ?? [])],
      {},
    );
    // The log's names are given here, each its own, so stacks sharing a server never meet (the config's are unused).
    const log = await createLocalLog({
      servers: nats.url,
      streamName,
      subjectPrefix: `gw${process.pid}x${counter}`,
      sessionsBucket: `s_${streamName}`,
      leasesBucket: `l_${streamName}`,
      principalsBucket: `p_${streamName}`,
      tasksStream: `t_${streamName}`,
      maxAgeMs: config.logMaxAgeMs,
      maxMsgsPerStream: config.logMaxMsgsPerStream,
      maxSessionsPerPrincipal: config.maxSessionsPerPrincipal,
    });
    const gateway = createGateway(config, log, pino({ level: process.env.TETHER_TEST_LOG ?? 'silent' }));
    const port = await gateway.listen();
    gateways.push(gateway);
    urls.push(`http://127.0.0.1:${port}/mcp`);
  }
  return {
    nats,
    upstream,
    gateways,
    urls,
    streamName,
    async teardown() {
      for (const g of gateways) await g.close().catch(() => undefined);
      await upstream.close();
      if (options.nats === undefined) await nats.cleanup();
    },
  };
}
