/**
 * Builds a host network and holds it until a signal: for the network's
 * integration test (which SIGTERMs or SIGKILLs it and then looks for what
 * is left) and for trying things by hand:
 *
 *   npx tsx test/chaos/net/hold-network.ts a b c     # prints {"runId":…,"hosts":[…]}, then waits
 */
import { createHostNetwork } from './hosts.js';

const names = process.argv.slice(2);
const net = await createHostNetwork({ hosts: names.length > 0 ? names : ['a', 'b'] });
process.stdout.write(`${JSON.stringify({ runId: net.runId, switchNetns: net.switchNetns, hosts: net.hosts })}\n`);
// Held open until a signal (the network's own hook removes everything, then the signal ends us).
setInterval(() => undefined, 60_000);
