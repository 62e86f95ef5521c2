/**
 * What an operator can read and do, whichever way the deployment is
 * reached: `natsOperator` over the log on NATS (credentials for the NATS
 * account), `openGrpcOperator` (grpc-operator.ts) over a session-log
 * service's operator API (an operator token, no NATS credentials). The
 * inspector and tether-admin take either; both give the same answers,
 * because the service runs `natsOperator` itself.
 */
import type { AdminAnswer } from '@tether/session-log';
import { openInspectAccess } from './access.js';
import type { InspectAccess, InspectAccessOptions } from './access.js';
import { closeSessionByTag, requestDrain } from './actions.js';
import type { CloseOutcome } from './actions.js';
import { listPartitions } from './partitions.js';
import type { PartitionState } from './partitions.js';
import { createLogReadModel } from './read-model.js';
import type { LogReadModel } from './read-model.js';
import { rebalancePartitions } from './rebalance.js';
import type { RebalanceResult } from './rebalance.js';

export interface Operator extends LogReadModel {
  /** Closes a session on every instance (see `closeSessionByTag`). */
  closeSession(tag: string): Promise<CloseOutcome>;
  /** Asks one gateway instance to drain (see `requestDrain`). */
  drainInstance(instance: string, timeoutMs?: number): Promise<AdminAnswer>;
  /** Every partition's stream size and Raft leaders (see `listPartitions`); NATS only (`unsupported` over gRPC). */
  listPartitions(): Promise<PartitionState[]>;
  /** Spreads the partitions' leaders over the servers (see `rebalancePartitions`); NATS only. */
  rebalancePartitions(): Promise<RebalanceResult>;
  /** What it reads, for log lines: a stream name or a gRPC target (never a credential). */
  readonly describe: string;
  /** Closes what it opened. */
  close(): Promise<void>;
}

/** The operator over an open access to the log on NATS; `close()` closes the access. */
export function natsOperator(access: InspectAccess): Operator {
  return {
    ...createLogReadModel(access),
    closeSession: (tag) => closeSessionByTag(access, tag),
    drainInstance: (instance, timeoutMs) => requestDrain(access, instance, timeoutMs),
    listPartitions: () => listPartitions(access),
    rebalancePartitions: () => rebalancePartitions(access),
    describe: `stream ${access.logName}`,
    close: () => access.close(),
  };
}

/** Opens the log on NATS and returns its operator. */
export async function openNatsOperator(options: InspectAccessOptions): Promise<Operator> {
  return natsOperator(await openInspectAccess(options));
}
