import { ResumeViolationCode } from '@tether/resume-guard';

/** What the probe concluded about a resume. Wire spelling (snake_case), stable for scripts. */
export const Classification = {
  /** The resume continued right after the cursor, with nothing missing, repeated or foreign. */
  correct: 'correct',
  /** The server answered the resume from an earlier point: events the client already had, again. */
  replayFromZero: 'replay_from_zero',
  /** Events after the cursor are missing, at the start of the resumed stream or inside it. */
  gap: 'gap',
  /** Another log answered: ids the client holds now name other events, or the ids changed epoch or format. */
  fork: 'fork',
  /** The resumed (or original) stream lost its `id:` fields. */
  fallbackWithoutIds: 'fallback_without_ids',
  /** The resume acknowledgment (`event: resume`) is malformed or contradicts the stream it opens. */
  malformedAck: 'malformed_ack',
  /** The server refused the resume in a way a client can see (a status or a `Tether-Resume` verdict). */
  explicitRefusal: 'explicit_refusal',
  /** The stream carries no ids at all: clients cannot resume it, and know it. */
  notResumable: 'not_resumable',
} as const;
export type Classification = (typeof Classification)[keyof typeof Classification];

/** Classifications that a client's happy path cannot see: the CLI exits 1 on them. */
export function isSilent(c: Classification): boolean {
  return c === 'replay_from_zero' || c === 'gap' || c === 'fork' || c === 'fallback_without_ids' || c === 'malformed_ack';
}

/** The classification a guard finding stands for. */
export function classificationOf(code: ResumeViolationCode): Classification {
  switch (code) {
    case ResumeViolationCode.replayFromZero:
      return Classification.replayFromZero;
    case ResumeViolationCode.gap:
      return Classification.gap;
    case ResumeViolationCode.fork:
      return Classification.fork;
    case ResumeViolationCode.silentFallback:
      return Classification.fallbackWithoutIds;
    case ResumeViolationCode.explicitRefusal:
      return Classification.explicitRefusal;
    case ResumeViolationCode.malformedAck:
      return Classification.malformedAck;
  }
}

/** For people: what a classification means, and what to do about it. */
export const GUIDANCE: Readonly<Record<Classification, { readonly means: string; readonly todo: string }>> = {
  correct: {
    means: 'A client that reconnects with Last-Event-ID gets the rest of its stream, nothing more and nothing less.',
    todo: 'Nothing. Probe again through your load balancer (--via another instance) if you run more than one.',
  },
  replay_from_zero: {
    means: 'The server ignored Last-Event-ID and sent events the client already had. A client acts on them twice (duplicate tool output, repeated progress) and cannot tell.',
    todo: 'Keep the event store across restarts and answer an unknown cursor with 404 (start a new session), never with a fresh replay.',
  },
  gap: {
    means: 'Events after the cursor never arrived: evicted from a buffer, or lost at a seam between a log and a send buffer. The client continues as if nothing was missing.',
    todo: 'Resume only from a log that still holds the event right after the cursor; when it does not, refuse (404) so the client starts over. Check buffer and log hand-offs.',
  },
  fork: {
    means: 'Another process answered with its own log (or a new one) under the same session: ids the client holds now name different events, and what the first process wrote is lost.',
    todo: 'Share one log per session across instances (or route resumes sticky) and refuse cursors of another log incarnation (an epoch in the id) instead of numbering from 1 again.',
  },
  fallback_without_ids: {
    means: 'The stream lost its id: fields, so the client has no cursor: the next reconnect replays or loses events, and nothing says so.',
    todo: 'Send an id with every event on every stream, including replays and fallbacks behind proxies; check what sits between client and server.',
  },
  malformed_ack: {
    means: 'The resumed stream opened with a resume acknowledgment (event: resume) that does not say what it must: the cursor as its id, data {"verdict":"resumed","stream":…,"next_seq":…}, and a next_seq the first event carries. A client cannot tell where the server resumed.',
    todo: 'Send the acknowledgment exactly as @tether/protocol encodeResumeAck writes it, or none at all; check what rewrites the stream on its way.',
  },
  explicit_refusal: {
    means: 'The server refused the resume in a way clients can see. Spec clients start a new session on 404; the events after the cursor are lost, but nobody is misled.',
    todo: 'Fine if it is rare. If the refusal is unexpected (for example --via another instance), share the session log across instances.',
  },
  not_resumable: {
    means: 'The stream has no event ids, so no client can resume it. A dropped connection loses the request, visibly.',
    todo: 'If resumption matters, configure an event store (and a priming event) so streams carry ids.',
  },
};
