/**
 * Operator requests for gateways without NATS (`--log grpc://`): WatchAdmin
 * holds `<prefix>.admin.<instance>` on NATS for its caller, where in-process
 * gateways listen themselves, so tether-admin's `drain <instance>` and the
 * operator API's DrainInstance reach both kinds unchanged. AnswerAdmin
 * carries the gateway's answer back; it may land on another service
 * instance than the stream (a balancer picks per call), so every answer goes
 * over NATS on `<prefix>.admin_answer.<instance>`, which each WatchAdmin
 * call of that instance also holds, and the call that forwarded the request
 * (its random id) replies to the requester.
 */
import { randomBytes } from 'node:crypto';
import { AdminRequestType as WireAdminType } from '@tether/cursor-proto';
import type { AnswerAdminRequest, AnswerAdminResponse, WatchAdminRequest, WatchAdminResponse } from '@tether/cursor-proto';
import { createSubjects, parseAdminRequest } from '@tether/session-log';
import type { AdminAnswer, SessionLog } from '@tether/session-log';
import { textOf } from './convert.js';
import { invalid } from './errors.js';
import { send, streaming } from './streams.js';
import type { StreamDeps } from './streams.js';

/** The NATS types, from the log's connection (this package does not depend on the client itself). */
type Subscription = ReturnType<SessionLog['connection']['subscribe']>;
type Msg = Parameters<NonNullable<NonNullable<Parameters<SessionLog['connection']['subscribe']>[1]>['callback']>>[1];

/** How long a forwarded request waits for the gateway's AnswerAdmin before the requester is told `ok: false` (under tether-admin's default 3 s). */
export const ADMIN_ANSWER_TIMEOUT_MS = 2_000;
/** Requests of one call awaiting an answer; more are answered `ok: false` at once. */
const MAX_PENDING = 64;
const REQUEST_ID = /^[0-9a-f]{32}$/;
const MAX_DETAIL_BYTES = 256;

/** A gateway's `--instance-id` as tether-admin checks it (requestDrain): subject-safe, one or more dot-separated tokens. */
export function instanceIdOf(name: string, value: string): string {
  if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(value) || value.includes('..') || value.startsWith('.') || value.endsWith('.')) {
    throw invalid(`${name} is not an instance id: ${JSON.stringify(value.slice(0, 40))}; instance ids are 1 to 128 of letters, digits, _ - : and single dots, not at either end`);
  }
  return value;
}

/** Where AnswerAdmin publishes an answer for the WatchAdmin calls of one instance. Core NATS, outside the log stream's subjects. */
function answerSubject(prefix: string, instance: string): string {
  return `${prefix}.admin_answer.${instance}`;
}

interface WireAnswer {
  readonly requestId: string;
  readonly ok: boolean;
  readonly detail: string;
}

export function watchAdminHandler(deps: StreamDeps) {
  return streaming<WatchAdminRequest, WatchAdminResponse>(deps, 'WatchAdmin', async (call, _caller, signal) => {
    const instance = instanceIdOf('instance', call.request.instance);
    const prefix = deps.log.config.subjectPrefix;
    const nc = deps.log.connection;
    const pending = new Map<string, { readonly msg: Msg; readonly timer: NodeJS.Timeout }>();
    const reply = (msg: Msg, answer: AdminAnswer): void => void msg.respond(JSON.stringify(answer));
    // A gateway answers, then drains, which ends this call: its answer may
    // arrive after the end. So an ended call keeps listening for answers
    // until each pending request is answered or times out.
    let ended = false;
    const settle = (requestId: string, answer: Omit<AdminAnswer, 'instance'>): void => {
      const entry = pending.get(requestId);
      if (entry === undefined) return;
      pending.delete(requestId);
      clearTimeout(entry.timer);
      reply(entry.msg, { instance, ...answer });
      if (ended && pending.size === 0) answers.unsubscribe();
    };
    const timedOut = (): string => `instance ${instance} (a gateway on the session-log service) did not answer within ${ADMIN_ANSWER_TIMEOUT_MS} ms${ended ? '; its admin stream ended' : ''}`;
    const answers: Subscription = nc.subscribe(answerSubject(prefix, instance), {
      callback: (err, msg) => {
        if (err !== null) return;
        try {
          const a = msg.json<WireAnswer>();
          if (typeof a.requestId === 'string' && typeof a.ok === 'boolean') settle(a.requestId, { ok: a.ok, ...(typeof a.detail === 'string' && a.detail !== '' ? { detail: a.detail.slice(0, MAX_DETAIL_BYTES) } : {}) });
        } catch {
          // Not an answer: ignored.
        }
      },
    });
    const requests = nc.subscribe(createSubjects(prefix).admin(instance));
    const stop = (): void => requests.unsubscribe();
    signal.addEventListener('abort', stop, { once: true });
    try {
      // Both subscriptions are registered locally; a flush makes sure the
      // server has them before we tell the caller it is open.
      await nc.flush();
      await send(call, { requestId: '', type: WireAdminType.UNSPECIFIED }, signal);
      deps.logger.info({ instance }, 'admin watcher open');
      for await (const msg of requests) {
        const request = parseAdminRequest(msg.data);
        if (request === undefined) {
          reply(msg, { ok: false, instance, detail: 'not an admin request' });
          continue;
        }
        if (pending.size >= MAX_PENDING) {
          reply(msg, { ok: false, instance, detail: `instance ${instance} has ${pending.size} admin requests unanswered` });
          continue;
        }
        const requestId = randomBytes(16).toString('hex');
        const timer = setTimeout(() => settle(requestId, { ok: false, detail: timedOut() }), ADMIN_ANSWER_TIMEOUT_MS);
        pending.set(requestId, { msg, timer });
        deps.logger.info({ instance, from: request.from ?? null, type: request.type }, 'admin request forwarded');
        await send(call, { requestId, type: WireAdminType.DRAIN, ...(request.from === undefined ? {} : { from: request.from }) }, signal);
      }
    } finally {
      signal.removeEventListener('abort', stop);
      requests.unsubscribe();
      ended = true;
      if (pending.size === 0) answers.unsubscribe();
      deps.logger.info({ instance }, 'admin watcher closed');
    }
  });
}

/** AnswerAdmin's body: checked, then published for whichever WatchAdmin call holds the request. */
export function answerAdmin(log: SessionLog, req: AnswerAdminRequest): AnswerAdminResponse {
  const instance = instanceIdOf('instance', req.instance);
  if (!REQUEST_ID.test(req.requestId)) throw invalid('request_id is not one WatchAdmin sent (32 lowercase hex digits)');
  const detail = textOf('detail', req.detail, MAX_DETAIL_BYTES);
  const answer: WireAnswer = { requestId: req.requestId, ok: req.ok, detail };
  log.connection.publish(answerSubject(log.config.subjectPrefix, instance), JSON.stringify(answer));
  return {};
}
