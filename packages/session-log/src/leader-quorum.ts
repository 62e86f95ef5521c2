import type { ClusterInfo, JetStreamManager, StreamInfo } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

/**
 * A peer counts towards the leader's quorum if the leader heard from it
 * (an append or heartbeat response; followers answer the leader's 1 s
 * heartbeats) at most this long ago: above the heartbeat, below the 4 s
 * minimum election timeout of nats-server's Raft.
 */
export const QUORUM_HEARD_WITHIN_MS = 3_000;

/**
 * How long a confirmed quorum is trusted for later "not found" answers of the
 * same stream, from when its STREAM.INFO was sent. A majority heard less than
 * 3 s before the leader answered means it was cut off less than 3 s before,
 * so no rival leader can be elected for at least 1 s more (4 s of silence
 * first); a "not found" that arrives within 500 ms of the question's sending
 * was answered inside that second.
 */
export const QUORUM_VERDICT_MS = 500;

/**
 * How long a STREAM.INFO question waits for more answers after the last one.
 * Only a leader answers it, so a second answer is a second server that
 * believes it leads: a deposed leader that has not yet heard of the new
 * term (it answers within the same round trip as the real one).
 */
export const LEADER_ANSWERS_STALL_MS = 50;

const NANOS_PER_MS = 1_000_000;

/** {@link LeaderQuorumCheck.recheck}'s answer: why the "not found" is in doubt, or what the read asked again found. */
export type Recheck<T> = { readonly doubt: string } | { readonly doubt: undefined; readonly value: T | undefined };

/**
 * Tells whether the leader of a replicated stream could still be the only
 * one, before a caller believes its "no message found".
 *
 * Why: nats-server's Raft leader steps down only after it has heard from no
 * quorum for 10 s (`lostQuorumInterval`), while its cut-off followers elect
 * a new leader after 4-9 s. For up to ~6 s two nodes lead, and the old one,
 * still reachable by some clients, answers reads from its stale state: a
 * message stored through the new leader is "not found" there (finding 16).
 * A record found there can be stale too, but only as a read a moment
 * earlier would have been (writes compare-and-set through the quorum);
 * "not found" is the one answer a client takes as final, so only it asks.
 *
 * How: STREAM.INFO, answered by the same leader, lists each peer's
 * `active` (nanoseconds since the leader last heard it). The answer stands
 * when the leader and the peers heard within {@link QUORUM_HEARD_WITHIN_MS}
 * make a majority. A positive verdict is reused for {@link QUORUM_VERDICT_MS}
 * (and a check in flight is shared), so a burst of lookups of unknown ids
 * costs one STREAM.INFO per half second per stream, and a found record costs
 * nothing.
 *
 * Two leaders at once: when the cut heals, the old leader may still lead
 * (it steps down on the first message of the new term it hears; heartbeats
 * are 1 s apart) while the new one does, and a request can reach both. So
 * the STREAM.INFO collects every answer for {@link LEADER_ANSWERS_STALL_MS}:
 * two servers naming themselves leader is a doubt. That alone did not close
 * it (finding 18): a read takes the first answer, and the nearest server,
 * the old leader to its own clients, answers first, while the check can
 * miss its answer (it stalls on the first) or come from after it stepped
 * down. So a "not found" stands only if the read is asked again after the
 * check and, asked of every leader at once (STREAM.MSG.GET gathered like
 * STREAM.INFO), exactly one answered and it holds nothing: {@link recheck},
 * {@link absenceDoubt}.
 */
export class LeaderQuorumCheck {
  readonly #nc: NatsConnection;
  /** The JetStream API prefix of `jsm` (STREAM.INFO goes out as a plain request, to hear every answer). */
  readonly #apiPrefix: string;
  /** Stream → until when (`performance.now()`) a "not found" may be believed without asking again. */
  readonly #confirmedUntil = new Map<string, number>();
  readonly #inFlight = new Map<string, Promise<string | undefined>>();

  constructor(nc: NatsConnection, jsm: JetStreamManager) {
    this.#nc = nc;
    this.#apiPrefix = jsm.getOptions().apiPrefix ?? '$JS.API';
  }

  /**
   * Undefined when the stream's leader had a quorum when asked (or recently
   * enough), else why it is in doubt (the caller answers "unavailable").
   * Call it after the "not found" arrived: the cached verdict covers only
   * answers received within {@link QUORUM_VERDICT_MS} of its question.
   */
  async doubt(stream: string): Promise<string | undefined> {
    if ((this.#confirmedUntil.get(stream) ?? 0) > performance.now()) return undefined;
    const pending = this.#inFlight.get(stream);
    // A check sent before our answer arrived covers it (see QUORUM_VERDICT_MS).
    if (pending !== undefined) return pending;
    const sentAt = performance.now();
    const check = this.#leaderAnswers(stream).then(
      (answers) => {
        const doubt = leadersDoubt(answers);
        if (doubt === undefined) this.#confirmedUntil.set(stream, sentAt + QUORUM_VERDICT_MS);
        return doubt;
      },
      (err: unknown) => `no stream info: ${String(err)}`,
    );
    this.#inFlight.set(stream, check);
    try {
      return await check;
    } finally {
      this.#inFlight.delete(stream);
    }
  }

  /**
   * What a read of `stream` that found nothing may answer: the doubt when its
   * leader may not be the only one, else what `reread()` finds now. The first
   * "not found" may have come from a leader that stepped down just after, and
   * the check from the new one, so the read is asked again after a passing
   * check; with `subject` (the read's `last_by_subj`), also of every leader
   * at once, and a "not found" stands only if one leader answered and holds
   * nothing (see the class comment). The one place the callers' "not found"
   * goes through: the task table, the session registry, the SDK's store.
   */
  async recheck<T>(stream: string, reread: () => Promise<T | undefined>, subject?: string): Promise<Recheck<T>> {
    const doubt = await this.doubt(stream);
    if (doubt !== undefined) return { doubt };
    if (subject === undefined) return { doubt: undefined, value: await reread() };
    // Finding 18: the reread, like the first read, takes the first answer, and
    // the nearest server answers first. Every leader's answer is heard too.
    const [value, answers] = await Promise.all([reread(), this.#everyLeaderGet(stream, subject)]);
    if (value !== undefined) return { doubt: undefined, value };
    const absentDoubt = absenceDoubt(answers);
    return absentDoubt === undefined ? { doubt: undefined, value: undefined } : { doubt: absentDoubt };
  }

  /**
   * What every server that answers STREAM.MSG.GET `last_by_subj: subject` as
   * the stream's leader says, gathered until none came for
   * {@link LEADER_ANSWERS_STALL_MS}: `found`, `absent` (10037), or another error.
   */
  async #everyLeaderGet(stream: string, subject: string): Promise<LeaderGetAnswer[]> {
    const answers: LeaderGetAnswer[] = [];
    try {
      const replies = await this.#nc.requestMany(`${this.#apiPrefix}.STREAM.MSG.GET.${stream}`, JSON.stringify({ last_by_subj: subject }), { strategy: 'stall', stall: LEADER_ANSWERS_STALL_MS, maxWait: 5_000 });
      for await (const msg of replies) {
        // A status-only answer (no responders) has no body.
        answers.push(msg.data.length === 0 ? { t: 'error', why: 'an answer without a body' } : leaderGetAnswer(msg.json<{ message?: unknown; error?: { err_code?: number; description?: string } }>()));
      }
    } catch (err) {
      answers.push({ t: 'error', why: `no answer: ${String(err)}` });
    }
    return answers;
  }

  /** Every server's answer to STREAM.INFO of `stream`, gathered until none came for {@link LEADER_ANSWERS_STALL_MS}. */
  async #leaderAnswers(stream: string): Promise<StreamInfo[]> {
    const answers: StreamInfo[] = [];
    // An error answer (the meta leader's, for a stream without a leader) counts only when no leader answered.
    let error: string | undefined;
    const replies = await this.#nc.requestMany(`${this.#apiPrefix}.STREAM.INFO.${stream}`, undefined, { strategy: 'stall', stall: LEADER_ANSWERS_STALL_MS, maxWait: 5_000 });
    for await (const msg of replies) {
      const body = msg.json<StreamInfo & { error?: { description?: string } }>();
      if (body.error !== undefined) error ??= body.error.description ?? 'JetStream API error';
      else answers.push(body);
    }
    if (answers.length === 0 && error !== undefined) throw new Error(error);
    return answers;
  }
}

/** One server's answer to STREAM.MSG.GET, as {@link absenceDoubt} weighs it. */
export type LeaderGetAnswer = { readonly t: 'found' } | { readonly t: 'absent' } | { readonly t: 'error'; readonly why: string };

/** JetStream's "no message found" error code. */
const NO_MESSAGE_FOUND = 10037;

function leaderGetAnswer(body: { message?: unknown; error?: { err_code?: number; description?: string } }): LeaderGetAnswer {
  if (body.error === undefined) return body.message === undefined ? { t: 'error', why: 'an answer with neither message nor error' } : { t: 'found' };
  if (body.error.err_code === NO_MESSAGE_FOUND || /no message found/i.test(body.error.description ?? '')) return { t: 'absent' };
  return { t: 'error', why: body.error.description ?? 'JetStream API error' };
}

/**
 * Undefined when a "no message" may be believed: exactly one server
 * answered STREAM.MSG.GET as the leader, and it holds nothing. A server
 * that holds the message, or a second answer (two servers leading), or none,
 * is a doubt: the old leader of a cut that just healed answers from its
 * stale store, and being the nearest, first (finding 18).
 */
export function absenceDoubt(answers: readonly LeaderGetAnswer[]): string | undefined {
  if (answers.length === 1 && answers[0]!.t === 'absent') return undefined;
  if (answers.some((a) => a.t === 'found')) return 'a leader holds the message another answered absent: a leader deposed but not yet told';
  if (answers.length === 0) return 'no server answered the read as the stream leader';
  return `the read asked of every leader got ${answers.length} answers (${answers.map((a) => (a.t === 'error' ? a.why : a.t)).join(', ')})`;
}

/** Undefined when exactly one server answered as the stream's leader and it had a quorum. */
export function leadersDoubt(answers: readonly StreamInfo[]): string | undefined {
  if (answers.length === 0) return 'no server answered as the stream leader';
  const leaders = [...new Set(answers.map((info) => info.cluster?.leader ?? ''))];
  if (leaders.length > 1) return `${leaders.length} servers answered as the stream leader (${leaders.join(', ')}): a leader deposed but not yet told`;
  return quorumDoubt(answers[0]?.cluster);
}

/** Undefined when the leader and the peers it heard recently make a majority of the group. */
export function quorumDoubt(cluster: ClusterInfo | undefined, heardWithinMs = QUORUM_HEARD_WITHIN_MS): string | undefined {
  // Not clustered: the one server is the store.
  if (cluster === undefined) return undefined;
  if (cluster.leader === undefined || cluster.leader === '') return 'the stream has no leader';
  const peers = cluster.replicas ?? [];
  // `active` is 0 for a peer the leader never heard since it started.
  const heard = peers.filter((peer) => peer.active > 0 && peer.active <= heardWithinMs * NANOS_PER_MS);
  if ((1 + heard.length) * 2 > peers.length + 1) return undefined;
  const last = peers.map((peer) => `${peer.name} ${peer.active > 0 ? `${Math.round(peer.active / NANOS_PER_MS)} ms ago` : 'never'}`).join(', ');
  return `stream leader ${cluster.leader} heard from ${heard.length} of ${peers.length} peers in the last ${heardWithinMs} ms (${last}): it may be cut off while others elect a new leader`;
}
