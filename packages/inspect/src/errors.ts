/** Error codes of the read model and tether-admin (match on `code`). */
export const InspectErrorCode = {
  /** Bad input: a malformed tag, an unknown flag, a bad value (tether-admin exits 2). */
  invalidArgument: 'invalid_argument',
  /** No session of the deployment has that tag. */
  sessionNotFound: 'session_not_found',
  /** The stream or bucket the names point at does not exist. */
  logNotFound: 'log_not_found',
  /** NATS or JetStream did not answer. */
  unavailable: 'unavailable',
  /** No task of the deployment has that id (or tasks were never used in its namespace). */
  taskNotFound: 'task_not_found',
  /** What was asked is not served this way: tasks through the operator API (its proto has no task RPCs). */
  unsupported: 'unsupported',
  /** No gateway instance of that name answered a drain request. */
  instanceNotFound: 'instance_not_found',
  /** The operator API refused the token, or runs without `--operator-token` (`operator_api_off`). */
  unauthenticated: 'unauthenticated',
  operatorApiOff: 'operator_api_off',
} as const;
export type InspectErrorCode = (typeof InspectErrorCode)[keyof typeof InspectErrorCode];

export class InspectError extends Error {
  readonly code: InspectErrorCode;
  constructor(code: InspectErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InspectError';
    this.code = code;
  }
}

export function isInspectError(err: unknown, code?: InspectErrorCode): err is InspectError {
  return err instanceof InspectError && (code === undefined || err.code === code);
}

/**
 * A message that may name a subject, with the session token taken out:
 * `….log.<session>.…`, `….audit.<session>` and `….ctl.<session>` hold the
 * raw session id, `….edge.task.<id>`, `….edge.live.<id>` and `….edge.event.<id>` a task
 * id (a bearer handle); neither is ever logged or sent to an operator.
 */
export function scrub(message: string): string {
  return message.replace(/\.(log|audit|ctl|edge\.task|edge\.live|edge\.event)\.[^.\s>*'"]+/g, '.$1.…');
}
