import { TaskErrorCode, TaskStoreError } from './errors.js';
import { NAMESPACE_ALLOWED, NAMESPACE_PATTERN } from '@tether/session-log';
import { taskNamespaceNames } from './wire.js';

/** Options of {@link createDurableTasks} besides the connection. Every one has a default. */
export interface DurableTasksOptions {
  /**
   * The deployment's namespace, as the log's (`SessionLogOptions.namespace`):
   * the defaults of both streams and the subject prefix derive from it
   * (`TETHER_TASKS_<ns>`, `TETHER_TASK_MSGS_<ns>`, `tether_<ns>.task`), so the
   * tasks of two namespaces never meet. An explicit name below still wins.
   * Default `''`: no namespace, today's names exactly.
   */
  readonly namespace?: string;
  /** Stream of task records. Default `TETHER_TASKS` (`TETHER_TASKS_<namespace>`). */
  readonly tasksStream?: string;
  /** Stream of queued messages. Default `TETHER_TASK_MSGS` (`TETHER_TASK_MSGS_<namespace>`). */
  readonly messagesStream?: string;
  /** Subject prefix of both streams. Default `tether.task` (`tether_<namespace>.task`). */
  readonly subjectPrefix?: string;
  /** Replicas of both streams. Default 1. */
  readonly replicas?: number;
  /**
   * The longest TTL a task gets. A request for more, or for none (`ttl: null`,
   * which the SDK's in-memory store keeps forever), gets this one; the task
   * returned says so (the spec lets a receiver override the requested TTL and
   * requires it to report the TTL it applies). Default 24 h.
   */
  readonly maxTtlMs?: number;
  /** `pollInterval` of a task whose creator asked for none. Default 1000, as the SDK's in-memory store. */
  readonly defaultPollIntervalMs?: number;
  /** Largest result, as JSON bytes. Default 512 KiB, and never more than the server's `max_payload` leaves room for. */
  readonly maxResultBytes?: number;
  /** Largest queued message, as JSON bytes. Default: what the server's `max_payload` allows. */
  readonly maxQueuedMessageBytes?: number;
  /** Tasks per `listTasks` page. Default 10, as the SDK's in-memory store. */
  readonly listPageSize?: number;
  /** How long one JetStream request may take. Default 5000. */
  readonly requestTimeoutMs?: number;
}

export interface DurableTasksConfig {
  /** '' for none. */
  readonly namespace: string;
  readonly tasksStream: string;
  readonly messagesStream: string;
  readonly subjectPrefix: string;
  readonly replicas: number;
  readonly maxTtlMs: number;
  readonly defaultPollIntervalMs: number;
  readonly maxResultBytes: number;
  readonly maxQueuedMessageBytes: number | undefined;
  readonly listPageSize: number;
  readonly requestTimeoutMs: number;
}

const STREAM_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const SUBJECT_PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

export function resolveTasksConfig(options: DurableTasksOptions): DurableTasksConfig {
  const namespace = options.namespace ?? '';
  // Checked before anything is derived from it: a bad namespace is named as such, not as the stream it would make.
  if (namespace !== '' && (typeof namespace !== 'string' || !NAMESPACE_PATTERN.test(namespace))) bad('namespace', namespace, NAMESPACE_ALLOWED);
  const names = taskNamespaceNames(namespace);
  const config: DurableTasksConfig = {
    namespace,
    tasksStream: options.tasksStream ?? names.tasksStream,
    messagesStream: options.messagesStream ?? names.messagesStream,
    subjectPrefix: options.subjectPrefix ?? names.subjectPrefix,
    replicas: options.replicas ?? 1,
    maxTtlMs: options.maxTtlMs ?? 24 * 3_600_000,
    defaultPollIntervalMs: options.defaultPollIntervalMs ?? 1000,
    maxResultBytes: options.maxResultBytes ?? 512 * 1024,
    maxQueuedMessageBytes: options.maxQueuedMessageBytes,
    listPageSize: options.listPageSize ?? 10,
    requestTimeoutMs: options.requestTimeoutMs ?? 5000,
  };
  for (const key of ['tasksStream', 'messagesStream'] as const) {
    if (!STREAM_NAME.test(config[key])) bad(key, config[key], 'letters, digits, _ and -, at most 64');
  }
  if (config.tasksStream === config.messagesStream) bad('messagesStream', config.messagesStream, 'a name other than tasksStream');
  if (!SUBJECT_PREFIX.test(config.subjectPrefix)) bad('subjectPrefix', config.subjectPrefix, 'dot-separated tokens of letters, digits, _ and -');
  if (![1, 3, 5].includes(config.replicas)) bad('replicas', config.replicas, '1, 3 or 5');
  // Nats-TTL counts whole seconds, so a TTL cap under one second could not be honoured by the server.
  if (!Number.isInteger(config.maxTtlMs) || config.maxTtlMs < 1000) bad('maxTtlMs', config.maxTtlMs, 'an integer of at least 1000');
  for (const key of ['defaultPollIntervalMs', 'maxResultBytes', 'listPageSize', 'requestTimeoutMs'] as const) {
    if (!Number.isInteger(config[key]) || config[key] < 1) bad(key, config[key], 'a positive integer');
  }
  const q = config.maxQueuedMessageBytes;
  if (q !== undefined && (!Number.isInteger(q) || q < 1)) bad('maxQueuedMessageBytes', q, 'a positive integer');
  return config;
}

function bad(key: string, value: unknown, want: string): never {
  throw new TaskStoreError(TaskErrorCode.invalidConfig, `${key} is ${JSON.stringify(value)}, must be ${want}`, { detail: { key } });
}
