/**
 * Operator requests for gateways without NATS (`--log grpc://`): WatchAdmin
 * holds, for its caller, the subject tether-admin's `drain` and the operator
 * API's DrainInstance send to, and forwards what comes. AnswerAdmin carries
 * the gateway's answer back; it may land on another service instance than
 * the stream (a balancer picks per call), so every answer goes over NATS on
 * `<prefix>.admin_answer.<address>`, which each WatchAdmin call of that
 * address also holds, and the call that forwarded the request (its random
 * id) replies to the requester.
 *
 * Instance ids are scoped per caller, as ServeCancels' writer ids are: any
 * caller may name any instance, so the subject held is not the plain
 * `<prefix>.admin.<instance>` (another tenant's token watching a victim's
 * name would get its drain requests and could answer them first, ok or
 * not, for it) but `<prefix>.admin.<address>`, the address being
 * `grpc.<caller tag>.<instance>`. Another caller naming the same instance
 * holds another address. The operator still drains by name: tether-admin
 * asks `<prefix>.admin_where.<instance>` first (requestDrain in
 * @tether/inspect), which every WatchAdmin call of that name answers with
 * its address; one address is drained, several (two callers naming one
 * instance) are named back to the operator and none is drained, so a
 * caller can at worst make a name ambiguous, never take its requests. The
 * address also comes in the call's first response for the gateway to log,
 * and an operator may give it instead of the name. Plain
 * `<prefix>.admin.<instance>` stays the in-process gateways' (NATS
 * permissions guard it).
 */
import { randomBytes } from 'node:crypto';
import { AdminRequestType as WireAdminType } from '@tether/cursor-proto';
import type { AnswerAdminRequest, AnswerAdminResponse, WatchAdminRequest, WatchAdminResponse } from '@tether/cursor-proto';
import { createSubjects, parseAdminRequest } from '@tether/session-log';
import type { AdminAnswer, SessionLog } from '@tether/session-log';
import { textOf } from './convert.js';
import { invalid } from './errors.js';
import { callerTag } from './scope.js';
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

/** Longest instance id of a caller: its address (`grpc.` + 22 + `.` + instance) must be an instance id tether-admin accepts (128). */
const MAX_INSTANCE_CHARS = 100;

/** The caller's instance as operators address it: the `admin` subject's instance part, never another caller's. */
export function adminAddress(caller: string, instance: string): string {
  return `grpc.${callerTag(caller)}.${instance}`;
}

/** A caller's instance id, checked, and its address. */
function addressed(caller: string, value: string): { readonly instance: string; readonly address: string } {
  const instance = instanceIdOf('instance', value);
  if (instance.length > MAX_INSTANCE_CHARS) throw invalid(`instance is longer than ${MAX_INSTANCE_CHARS} characters: its address, grpc.<caller tag>.<instance>, must fit in 128`);
  return { instance, address: adminAddress(caller, instance) };
}

/** Where AnswerAdmin publishes an answer for the WatchAdmin calls of one address. Core NATS, outside the log stream's subjects. */
function answerSubject(prefix: string, address: string): string {
  return `${prefix}.admin_answer.${address}`;
}

interface WireAnswer {
  readonly requestId: string;
  readonly ok: boolean;
  readonly detail: string;
}

export function watchAdminHandler(deps: StreamDeps) {
  return streaming<WatchAdminRequest, WatchAdminResponse>(deps, 'WatchAdmin', async (call, caller, signal) => {
    const { instance, address } = addressed(caller, call.request.instance);
    const prefix = deps.log.config.subjectPrefix;
    const subjects = createSubjects(prefix);
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
    const answers: Subscription = nc.subscribe(answerSubject(prefix, address), {
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
    const requests = nc.subscribe(subjects.admin(address));
    // tether-admin's question before a drain by name: this call's address.
    const where = nc.subscribe(subjects.adminWhere(instance), { callback: (err, msg) => void (err === null && msg.respond(address)) });
    const stop = (): void => {
      requests.unsubscribe();
      where.unsubscribe();
    };
    signal.addEventListener('abort', stop, { once: true });
    try {
      // The subscriptions are registered locally; a flush makes sure the
      // server has them before we tell the caller it is open.
      await nc.flush();
      await send(call, { requestId: '', type: WireAdminType.UNSPECIFIED, address }, signal);
      deps.logger.info({ instance, address }, 'admin watcher open');
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
      stop();
      ended = true;
      if (pending.size === 0) answers.unsubscribe();
      deps.logger.info({ instance }, 'admin watcher closed');
    }
  });
}

/** AnswerAdmin's body: checked, then published for whichever WatchAdmin call of the caller's holds the request. */
export function answerAdmin(log: SessionLog, caller: string, req: AnswerAdminRequest): AnswerAdminResponse {
  const { address } = addressed(caller, req.instance);
  if (!REQUEST_ID.test(req.requestId)) throw invalid('request_id is not one WatchAdmin sent (32 lowercase hex digits)');
  const detail = textOf('detail', req.detail, MAX_DETAIL_BYTES);
  const answer: WireAnswer = { requestId: req.requestId, ok: req.ok, detail };
  log.connection.publish(answerSubject(log.config.subjectPrefix, address), JSON.stringify(answer));
  return {};
}
