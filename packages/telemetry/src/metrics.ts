import { metrics } from '@opentelemetry/api';
import type { Counter, Histogram, UpDownCounter } from '@opentelemetry/api';

/** Tether's instruments. Names are stable: dashboards and alerts use them (`tether_resumes_total` in Prometheus). */
export interface TetherMetrics {
  /** Resumes by verdict (`verdict` attribute). */
  readonly resumes: Counter;
  /** Events replayed by an accepted resume before it went live. */
  readonly replayEvents: Histogram;
  /** Time from append call to JetStream acknowledgement, ms. */
  readonly appendDuration: Histogram;
  /** Events between a resuming client's cursor and the stream's head when it resumed. */
  readonly streamLag: Histogram;
  /** Client streams open on this instance. */
  readonly streamsOpen: UpDownCounter;
  /** Sessions with activity on this instance (watched), up and down. */
  readonly sessionsOpen: UpDownCounter;
  /** Writer leases taken over from a dead or departed writer. */
  readonly leaseTakeovers: Counter;
  /** Sessions refused because their principal had `max-sessions-per-principal` open (`reason` attribute). */
  readonly sessionsRefused: Counter;
  /** Upstream calls that failed (`reason` attribute). */
  readonly upstreamErrors: Counter;
  /** Requests refused by `--auth jwt|introspect`, by `reason` (expired, audience, signature, scope, issuer_unavailable, …). */
  readonly authRefusals: Counter;
  /** Tasks at the edge (2026-07-28), by `event`: created, completed, failed, cancelled, input_required, expired, runner_lost, runner_lost_swept (settled by the sweeper), rerun. */
  readonly tasks: Counter;
  /** Upstream calls of tasks running on this instance. */
  readonly tasksRunning: UpDownCounter;
}

export const METRIC_NAMES = [
  'tether.resumes',
  'tether.replay.events',
  'tether.append.duration',
  'tether.stream.lag',
  'tether.streams.open',
  'tether.sessions.open',
  'tether.lease.takeovers',
  'tether.sessions.refused',
  'tether.upstream.errors',
  'tether.tasks',
  'tether.tasks.running',
] as const;

/** Instruments from the global meter provider (no-ops until the SDK starts). */
export function createTetherMetrics(scope = 'tether'): TetherMetrics {
  const meter = metrics.getMeter(scope);
  return {
    resumes: meter.createCounter('tether.resumes', { description: 'Resumes by verdict' }),
    replayEvents: meter.createHistogram('tether.replay.events', { description: 'Events replayed per accepted resume' }),
    appendDuration: meter.createHistogram('tether.append.duration', { description: 'Append latency until acknowledged', unit: 'ms' }),
    streamLag: meter.createHistogram('tether.stream.lag', { description: 'Events behind the head when a client resumed' }),
    streamsOpen: meter.createUpDownCounter('tether.streams.open', { description: 'Client streams open on this instance' }),
    sessionsOpen: meter.createUpDownCounter('tether.sessions.open', { description: 'Sessions with activity on this instance' }),
    leaseTakeovers: meter.createCounter('tether.lease.takeovers', { description: 'Writer leases taken over' }),
    sessionsRefused: meter.createCounter('tether.sessions.refused', { description: 'Sessions refused at creation, by reason' }),
    upstreamErrors: meter.createCounter('tether.upstream.errors', { description: 'Failed upstream calls' }),
    authRefusals: meter.createCounter('tether.auth.refusals', { description: 'Requests refused by token validation, by reason' }),
    tasks: meter.createCounter('tether.tasks', { description: 'Task events at the edge: created, completed, failed, cancelled, input_required, expired, runner_lost, runner_lost_swept (settled by the sweeper), rerun' }),
    tasksRunning: meter.createUpDownCounter('tether.tasks.running', { description: 'Upstream calls of tasks running on this instance' }),
  };
}
