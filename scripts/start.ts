/**
 * `npm start`: brings up Tether's local stack and says what is running.
 *
 * NATS is the one at TETHER_NATS_URL, or else an embedded nats-server child
 * process with JetStream and its data under `.tether/nats`. The session log is
 * set up on it and checked end to end (append, then a resume that must yield
 * exactly the suffix). Ctrl-C stops everything this script started.
 */
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { SessionLog, principalDigest } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';

const log = (line: string): void => {
  process.stdout.write(`[tether] ${line}\n`);
};

async function main(): Promise<void> {
  let embedded: NatsServer | undefined;
  let natsUrl = process.env.TETHER_NATS_URL;
  if (natsUrl === undefined || natsUrl === '') {
    const storeDir = resolve('.tether/nats');
    mkdirSync(storeDir, { recursive: true });
    embedded = await startNatsServer({ storeDir });
    natsUrl = embedded.url;
    log(`embedded nats-server pid ${embedded.pid} at ${natsUrl} (data in ${storeDir})`);
  } else {
    log(`using NATS at ${natsUrl}`);
  }

  const sessionLog = await SessionLog.create({ servers: natsUrl });
  log(`session log ready: stream ${sessionLog.config.streamName}, subjects ${sessionLog.config.subjectPrefix}.log.>`);
  await selfCheck(sessionLog);

  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log('stopping');
    await sessionLog.close();
    await embedded?.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  log('running; press Ctrl-C to stop');
}

/** Appends three events and resumes after the first: the log must answer with exactly the other two. */
async function selfCheck(sessionLog: SessionLog): Promise<void> {
  const principal = principalDigest('tether-start-self-check');
  const session = await sessionLog.createSession(principal, { purpose: 'self-check' });
  const stream = sessionLog.newStreamId();
  const ids: string[] = [];
  for (const n of [1, 2, 3]) {
    const kind = n === 3 ? 'end' : 'event';
    ids.push((await sessionLog.append(session.sessionId, stream, kind, new TextEncoder().encode(`{"n":${n}}`))).id);
  }
  const result = await sessionLog.resume(session.sessionId, ids[0]!, principal);
  if (result.verdict !== 'resumed') throw new Error(`self-check resume was refused: ${result.verdict} (${result.reason})`);
  const got: string[] = [];
  for await (const event of result.events()) got.push(event.id);
  if (got.join(',') !== ids.slice(1).join(',')) throw new Error(`self-check resume yielded ${got.join(',')}, expected ${ids.slice(1).join(',')}`);
  await sessionLog.closeSession(session.sessionId);
  log(`self-check passed: resume after ${ids[0]} yielded exactly ${got.length} events, verdict ${result.verdict}`);
}

main().catch((err: unknown) => {
  process.stderr.write(`[tether] failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
