import { createInbox } from '@nats-io/transport-node';
import type { WriterPresence } from '@tether/sdk';
import { isTetherSdkError } from '@tether/sdk';
import { isSessionLogError } from '@tether/session-log';
import { errorText, preview } from './fuzz-kit.js';
import { PROTOCOL_VERSION } from './gateway-stack.js';
import type { SeededSession } from './gateway-stack.js';
import type { presenceCase, PresenceQuestion } from './sdk-arbitraries.js';
import type { RouterStack, SdkStack } from './sdk-stack.js';

type PresenceCase = typeof presenceCase extends import('fast-check').Arbitrary<infer T> ? T : never;

/** The stream the last probe of a case asks about (begun for it, finished after it). */
const FINAL = ['fuzz-final-probe', 'final'] as const;

/** Longest a presence may take to answer a question it answers (a hang bound; answers take a round trip). */
const PRESENCE_ANSWER_MS = 5_000;

/**
 * One case of the presence property: `begin`/`finish` with any session and
 * stream strings, then questions on the writer's subject, each with its own
 * reply inbox, then a real probe. What holdPresence promises
 * (session-log presence.ts): an empty question is answered `1` (alive); a
 * question of exactly two space-separated fields `1` when that stream was
 * begun and not finished, else `0`; anything else gets no answer (a
 * prober sees silence, never a false "not writing"); and bad questions
 * never stop it answering the next.
 */
export async function runPresenceCase(stack: SdkStack, presence: WriterPresence, c: PresenceCase): Promise<{ problems: string[]; notes: string[] }> {
  const problems: string[] = [];
  const notes: string[] = [];
  const open = new Set<string>();
  for (const m of c.marks) {
    if (m.begin) presence.begin(m.session, m.stream);
    else presence.finish(m.session, m.stream);
    if (m.begin) open.add(`${m.session} ${m.stream}`);
    else open.delete(`${m.session} ${m.stream}`);
  }
  const { nc } = stack;
  const subject = stack.subjects.writer(presence.writerId);
  const asked = c.questions.map((q) => {
    const bytes = questionBytes(q, c.marks, open);
    const text = new TextDecoder().decode(bytes);
    const fields = text.split(' ');
    const expected = text === '' ? '1' : fields.length === 2 ? (open.has(`${fields[0]} ${fields[1]}`) ? '1' : '0') : undefined;
    const inbox = createInbox();
    const answers: string[] = [];
    const sub = nc.subscribe(inbox, { callback: (_err, msg) => void answers.push(msg.string()) });
    nc.publish(subject, bytes, { reply: inbox });
    return { q, text, expected, answers, sub };
  });
  try {
    // The questions go out on the test's own connection, the probes below on the presence's: without
    // this flush a probe may reach the server first and be answered before the questions are asked.
    await nc.flush();
    const { log } = stack.instances[0];
    const alive = await log.probeWriter(presence.writerId, PRESENCE_ANSWER_MS);
    if (alive !== 'writing') problems.push(`after the questions, a liveness probe answered ${alive}, expected writing (the presence stopped answering)`);
    // A stream question last: answered on the same path as every stream question before it (an
    // empty one is answered at once, ahead of them), so once it is, so is every earlier one that gets an answer.
    presence.begin(FINAL[0], FINAL[1]);
    const state = await log.probeWriter(presence.writerId, PRESENCE_ANSWER_MS, FINAL[0], FINAL[1]);
    presence.finish(FINAL[0], FINAL[1]);
    if (state !== 'writing') problems.push(`after the questions, a probe of a begun stream answered ${state}, expected writing`);
    // The server queued the questions' answers to this connection before the final probe's answer
    // went out; a flush here returns after they have arrived.
    await nc.flush();
    for (const a of asked) {
      const got = a.answers.join('|');
      const want = a.expected ?? '';
      notes.push(a.expected === undefined ? 'no answer' : `answer ${a.expected}`);
      if (got !== want) problems.push(`question ${preview(a.text, 120)} (${a.q.t}): answered ${JSON.stringify(got)}, expected ${a.expected === undefined ? 'no answer' : JSON.stringify(want)}`);
    }
  } finally {
    for (const a of asked) a.sub.unsubscribe();
    for (const key of open) {
      const [session = '', ...rest] = key.split(' ');
      presence.finish(session, rest.join(' '));
    }
  }
  if (problems.length > 0) problems.push(`marks: ${preview(c.marks, 600)}`);
  return { problems, notes };
}

function questionBytes(q: PresenceQuestion, marks: PresenceCase['marks'], open: ReadonlySet<string>): Uint8Array {
  switch (q.t) {
    case 'pair': {
      const pool = marks.filter((m) => open.has(`${m.session} ${m.stream}`) === q.open);
      const m = pool[q.pick % Math.max(1, pool.length)] ?? { session: 's9', stream: 'never' };
      return new TextEncoder().encode(`${m.session} ${m.stream}`);
    }
    case 'text':
      return new TextEncoder().encode(q.text);
    case 'bytes':
      return q.bytes;
  }
}

/**
 * How long the ping's SSE answer may stay open before it counts as unanswered:
 * the stream ends with the result, so this only bounds a hang. The fuzzed
 * requests' 200 ms window was too short for it on a loaded machine (the
 * priming event came, the result later).
 */
const PING_READ_MS = 10_000;

/** A good request to the router: `ping` in a live seeded session answers its result. */
export async function routerServes(router: RouterStack, session: SeededSession): Promise<string | undefined> {
  const res = await router.send({
    method: 'POST',
    path: '/mcp',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION, 'mcp-session-id': session.sessionId },
    body: Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 4242, method: 'ping' })),
  }, PING_READ_MS);
  if (res.status === 200 && /"id":4242/.test(res.body) && /"result"/.test(res.body)) return undefined;
  return `a ping in session ${session.sessionId} answered ${res.status}${res.cutOpen ? ' (left open)' : ''}: ${preview(res.body, 300)}`;
}

export type ReplayOutcome = { readonly ok: true; readonly value: string } | { readonly ok: false; readonly err: unknown };

/** What a replay must give: a refusal with one of `verdicts`, `unsupported` (a GET-stream cursor), or exactly `events` then the SDK's stream id. */
export type ReplayWant =
  | { readonly t: 'refused'; readonly verdicts: readonly string[] }
  | { readonly t: 'unsupported'; readonly overlap: boolean }
  | { readonly t: 'suffix'; readonly events: readonly { readonly id: string | undefined; readonly payload: string }[]; readonly sdkStreamId: string; readonly overlap: boolean };

/**
 * What is wrong with one `replayEventsAfter` outcome and the events it
 * sent, if anything. An accepted cursor gives exactly the events after it
 * (ids and messages) and resolves with the SDK's stream id; anything else
 * is `resume_refused` naming its verdict in `fields` and in the message,
 * with nothing sent. `overlap`: the stream was purged while the replay ran,
 * so an explicit truncation is fine too (a refusal, or `stream_truncated`
 * after a gap-free prefix).
 */
export function replayProblem(want: ReplayWant, outcome: ReplayOutcome, sends: readonly { id: string; message: unknown }[]): string | undefined {
  const sent = `sent [${sends.map((s) => s.id).join(', ')}]`;
  const truncatedRefusal = !outcome.ok && isTetherSdkError(outcome.err, 'resume_refused') && outcome.err.fields.verdict === 'truncated';
  if (want.t === 'suffix') {
    const events = want.events;
    const matches = (n: number) => sends.length === n && sends.every((s, i) => s.id === events[i]!.id && JSON.stringify(s.message) === events[i]!.payload);
    const shown = `[${events.map((e) => e.id).join(', ')}]`;
    if (outcome.ok) {
      if (!matches(events.length)) return `${sent}, expected exactly the stream's events after the cursor ${shown}`;
      if (outcome.value !== want.sdkStreamId) return `resolved with stream ${JSON.stringify(outcome.value)}, expected ${JSON.stringify(want.sdkStreamId)}`;
      return undefined;
    }
    if (want.overlap && truncatedRefusal && sends.length === 0) return undefined;
    if (want.overlap && isSessionLogError(outcome.err, 'stream_truncated') && sends.length < events.length && matches(sends.length)) return undefined;
    return `${errorText(outcome.err)} (${sent}) for a cursor naming a retained event: expected the events ${shown}`;
  }
  if (outcome.ok) return `resolved (${outcome.value}, ${sent}), expected ${want.t === 'refused' ? `a refusal (${want.verdicts.join(' or ')})` : 'unsupported'}`;
  if (sends.length > 0) return `${sent} before failing ${errorText(outcome.err)}`;
  if (want.t === 'unsupported') {
    if (isTetherSdkError(outcome.err, 'unsupported') || (want.overlap && truncatedRefusal)) return undefined;
    return `${errorText(outcome.err)}, expected unsupported (a GET-stream cursor)`;
  }
  const err = outcome.err;
  if (!isTetherSdkError(err, 'resume_refused') || err.fields.verdict === undefined || !want.verdicts.includes(err.fields.verdict)) {
    return `${errorText(err)}, expected resume_refused (${want.verdicts.join(' or ')})`;
  }
  if (!err.message.includes(err.fields.verdict)) return `the refusal's message does not name its verdict: ${JSON.stringify(err.message)}`;
  return undefined;
}
