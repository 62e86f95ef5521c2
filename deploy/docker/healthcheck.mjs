#!/usr/bin/env node
// Container health check for images without a shell or curl (distroless).
//
//   node healthcheck.mjs http [url]   GET url (default http://127.0.0.1:$TETHER_PORT/readyz,
//                                     port 8080): healthy on 200
//   node healthcheck.mjs grpc [addr]  grpc.health.v1.Health/Check for service "" on addr
//                                     (default 127.0.0.1:$TETHER_GRPC_PORT, port 50051,
//                                     plaintext): healthy on SERVING
//
// Exit code 0 when healthy, 1 otherwise, with one line on stderr saying why.
// Docker (HEALTHCHECK) and compose (healthcheck.test) run it; Kubernetes uses
// its own httpGet and grpc probes instead (deploy/k8s).
const TIMEOUT_MS = 2_000;
const [kind = 'http', target] = process.argv.slice(2);

const fail = (why) => {
  process.stderr.write(`unhealthy: ${why}\n`);
  process.exit(1);
};

if (kind === 'http') {
  const url = target ?? `http://127.0.0.1:${process.env.TETHER_PORT ?? '8080'}/readyz`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    const body = (await res.text()).trim();
    if (res.status !== 200) fail(`${url} answered ${res.status} ${body}`);
  } catch (err) {
    fail(`${url}: ${err instanceof Error ? err.message : String(err)}`);
  }
} else if (kind === 'grpc') {
  // Only the session-log image has these (its own dependencies).
  const grpc = await import('@grpc/grpc-js');
  const { default: health } = await import('grpc-health-check');
  const addr = target ?? `127.0.0.1:${process.env.TETHER_GRPC_PORT ?? '50051'}`;
  const Health = grpc.makeGenericClientConstructor(health.service, 'Health');
  const client = new Health(addr, grpc.credentials.createInsecure());
  const status = await new Promise((resolve) => {
    client.check({ service: '' }, { deadline: Date.now() + TIMEOUT_MS }, (err, reply) => resolve(err === null ? reply.status : `error ${err.code} ${err.details}`));
  });
  client.close();
  if (status !== 'SERVING' && status !== 1) fail(`${addr}: ${status}`);
} else {
  fail(`unknown check ${kind}; use http or grpc`);
}
process.exit(0);
