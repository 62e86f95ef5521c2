/**
 * `link-proxy.ts` in a process of its own, for one host of `--net hosts`
 * (started inside the host's namespace, so its connections leave from the
 * host's own address and the host's nft rules see them):
 *
 *   ip netns exec <host> node --import tsx link-proxy-main.ts --seed 7 \
 *     --link nats1=127.0.0.1:4301>10.77.0.11:4222 --link …
 *
 * Prints `{"msg":"listening","ports":{…}}`, then reads one JSON command per
 * stdin line and answers each on stdout with its `id`:
 * `{"id":1,"op":"shape","shape":{…},"links":["nats1"]}`,
 * `{"id":2,"op":"reset","refuseMs":500}`, `{"id":3,"op":"stats"}`.
 * Exits when stdin closes (its harness is gone) or on SIGTERM.
 */
import { createInterface } from 'node:readline';
import { startLinkProxy } from './link-proxy.js';
import type { LinkShape, LinkSpec } from './link-proxy.js';

const args = process.argv.slice(2);
const specs: LinkSpec[] = [];
let seed = 1;
for (let i = 0; i < args.length; i += 2) {
  const flag = args[i];
  const value = args[i + 1] ?? '';
  if (flag === '--seed') seed = Number(value);
  else if (flag === '--link') {
    const m = /^([a-z0-9_-]+)=([0-9.]+):(\d+)>([0-9.]+):(\d+)$/.exec(value);
    if (m === null) throw new Error(`--link ${JSON.stringify(value)}: want name=host:port>host:port`);
    specs.push({ name: m[1]!, listenHost: m[2]!, listenPort: Number(m[3]), targetHost: m[4]!, targetPort: Number(m[5]) });
  } else throw new Error(`unknown flag ${flag}`);
}

const proxy = await startLinkProxy(specs, seed);
process.stdout.write(`${JSON.stringify({ msg: 'listening', ports: proxy.ports })}\n`);

type Command = { id: number; op: 'shape'; shape: Partial<LinkShape>; links?: string[] } | { id: number; op: 'reset'; refuseMs: number; links?: string[] } | { id: number; op: 'stats' };
const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  let id: number | undefined;
  try {
    const cmd = JSON.parse(line) as Command;
    id = cmd.id;
    let result: unknown;
    if (cmd.op === 'shape') proxy.shape(cmd.shape, cmd.links);
    else if (cmd.op === 'reset') result = proxy.reset(cmd.refuseMs, cmd.links);
    else if (cmd.op === 'stats') result = proxy.stats();
    else throw new Error(`unknown op ${(cmd as { op: string }).op}`);
    process.stdout.write(`${JSON.stringify({ id, ok: true, result })}\n`);
  } catch (err) {
    process.stdout.write(`${JSON.stringify({ id, ok: false, error: (err as Error).message })}\n`);
  }
});
const stop = (): void => {
  void proxy.close().finally(() => process.exit(0));
};
lines.on('close', stop);
process.on('SIGTERM', stop);
