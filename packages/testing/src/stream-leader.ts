import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

// Helpers for tests that cut a replicated stream's leader off from its peers
// (finding 16): who leads as one node sees it, moving the leadership to a
// chosen node, and the window in which a cut-off leader still answers.

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** The stream's leader as the node behind `jsm` answers, or undefined (no answer, or no leader). */
export async function streamLeader(jsm: JetStreamManager, stream: string): Promise<string | undefined> {
  return jsm.streams.info(stream).then(
    (info) => info.cluster?.leader || undefined,
    () => undefined,
  );
}

/**
 * Moves `stream`'s leadership to the server named `to` (2.11+ takes a
 * preferred peer) and returns once that leader reports every peer current
 * and heard within 2 s: a write right after a move otherwise meets "JetStream
 * system temporarily unavailable" on a loaded machine.
 */
export async function moveStreamLeader(nc: NatsConnection, jsm: JetStreamManager, stream: string, to: string, timeoutMs = 30_000): Promise<void> {
  const startedAt = Date.now();
  let last = 'no answer';
  for (;;) {
    const info = await jsm.streams.info(stream).catch((err: unknown) => String(err).slice(0, 80));
    if (typeof info !== 'string') {
      const cluster = info.cluster;
      last = JSON.stringify({ leader: cluster?.leader, replicas: cluster?.replicas?.map((p) => ({ name: p.name, current: p.current, activeMs: Math.round(p.active / 1e6) })) });
      if (cluster?.leader === to && (cluster.replicas ?? []).every((p) => p.current && p.active / 1e6 < 2_000)) return;
      if (cluster?.leader !== undefined && cluster.leader !== to) {
        await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, JSON.stringify({ placement: { preferred: to } }), { timeout: 2_000 }).catch(() => undefined);
      }
    } else last = info;
    if (Date.now() - startedAt > timeoutMs) throw new Error(`could not move ${stream}'s leadership to ${to} with its peers current in ${timeoutMs} ms; last seen ${last}`);
    await sleep(500);
  }
}

/**
 * The part of finding 16 that no timing can miss. From 4 s after a stream's
 * leader was cut off from its peers (3 s without hearing them, plus the
 * 500 ms a quorum verdict is reused) until it steps down (after 10 s without
 * a quorum), it still leads and answers reads from a state that may be stale.
 * Calls `read` up to `reads` times, 100 ms apart, each only while the leader's
 * own STREAM.INFO still names it; returns how many ran. Whether B and C
 * elect a successor before that leader steps down, which the created-elsewhere
 * case needs, depends on the load of the machine; this does not.
 */
export async function readWhileCutOffLeaderLeads(options: {
  readonly cutAt: number;
  readonly jsm: JetStreamManager;
  readonly stream: string;
  readonly leader: string;
  readonly read: () => Promise<void>;
  readonly reads?: number;
}): Promise<number> {
  await sleep(Math.max(0, options.cutAt + 4_000 - Date.now()));
  let ran = 0;
  while (ran < (options.reads ?? 5) && (await streamLeader(options.jsm, options.stream)) === options.leader) {
    await options.read();
    ran += 1;
    await sleep(100);
  }
  return ran;
}

/**
 * Every server's answer, as heard through `nc` within 200 ms, to STREAM.INFO
 * of `stream` and (when given) to a STREAM.MSG.GET of `subject`'s last message: which
 * servers call themselves leader, what each heard from its peers, and what
 * each holds. For a test to print when a read answered what it should not
 * (finding 18: a "not found" in the instant a cut heals).
 */
export async function everyLeaderAnswer(nc: NatsConnection, stream: string, subject?: string): Promise<string> {
  const gather = async (api: string, body?: string): Promise<Record<string, unknown>[]> => {
    const out: Record<string, unknown>[] = [];
    try {
      for await (const msg of await nc.requestMany(`$JS.API.${api}.${stream}`, body, { strategy: 'timer', maxWait: 200 })) out.push(msg.json());
    } catch (err) {
      return [{ error: String(err).slice(0, 60) }];
    }
    return out;
  };
  const [infos, gets] = await Promise.all([gather('STREAM.INFO'), subject === undefined ? [] : gather('STREAM.MSG.GET', JSON.stringify({ last_by_subj: subject }))]);
  const describe = (answer: Record<string, unknown>) => {
    const error = answer['error'] as { code?: number; description?: string } | undefined;
    return error === undefined ? JSON.stringify(answer).slice(0, 80) : `${error.code ?? ''} ${error.description ?? ''}`.trim();
  };
  const info = infos.map((answer) => {
    const cluster = (answer as { cluster?: { leader?: string; replicas?: { name: string; active: number; current: boolean }[] } }).cluster;
    if (cluster === undefined) return describe(answer);
    const peers = (cluster.replicas ?? []).map((p) => `${p.name} active ${(p.active / 1e6).toFixed(0)} ms${p.current ? '' : ' not current'}`);
    return `leader ${cluster.leader || 'none'}: ${peers.join(', ')}`;
  });
  const get = gets.map((answer) => ('message' in answer ? `found seq ${(answer.message as { seq: number }).seq}` : describe(answer)));
  return `STREAM.INFO [${info.join(' | ') || 'no answer'}]${subject === undefined ? '' : `; MSG.GET [${get.join(' | ') || 'no answer'}]`}`;
}
