/**
 * How many partitions a deployment's log has, read from the deployment
 * itself, so an operator never has to know it and cannot get it wrong: a
 * session lives in partition `partitionOf(id, count)`, so the wrong count
 * would look for most sessions in streams that do not hold them and list
 * them as missing, or close them in the wrong registry.
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import { findLayout, MAX_PARTITIONS, PARTITIONS_METADATA_KEY } from '@tether/session-log';
import type { SessionLogConfig } from '@tether/session-log';
import { InspectError, InspectErrorCode } from './errors.js';

/**
 * The log's partition count. An unpartitioned log is the stream
 * `TETHER_LOG[_<ns>]`; a partitioned one `TETHER_LOG-0[_<ns>]` … whose
 * metadata `tether_partitions` holds the count (`ensureLog` writes it and
 * refuses to start a process with another). Which of the two exists says
 * which layout it is, the metadata how many.
 *
 * `given` (`--log-partitions`) is checked against what the deployment
 * says: another count is `invalid_argument` naming both. Only when the
 * deployment cannot say (both layouts exist, or partition 0 lost its
 * metadata) is `given` needed, and then taken as is. `log_not_found` when
 * neither stream exists.
 */
export async function findPartitionCount(jsm: JetStreamManager, config: SessionLogConfig, given: number | undefined): Promise<number> {
  let found;
  try {
    found = await findLayout(jsm, config);
  } catch (err) {
    throw new InspectError(InspectErrorCode.unavailable, `cannot read the log's streams: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const { singleName: single, firstOfManyName: firstOfMany, one, many, recorded } = found;
  const text = many?.metadata?.[PARTITIONS_METADATA_KEY];
  if (one === undefined && many === undefined) {
    const names = given === undefined ? `${single} or ${firstOfMany}` : given === 1 ? single : firstOfMany;
    const ns = config.namespace === '' ? '' : ` (namespace ${config.namespace})`;
    throw new InspectError(InspectErrorCode.logNotFound, `no log stream ${names} on this NATS account${ns}: check --namespace and --nats`);
  }
  if (one !== undefined && many !== undefined) {
    // No process of the deployment starts like this (ensureLog refuses either count), so it is a migration or a mistake: the operator chooses.
    if (given === undefined) {
      throw new InspectError(
        InspectErrorCode.invalidArgument,
        `both ${single} (an unpartitioned log) and ${firstOfMany} (a log of ${recorded ?? 'an unknown number of'} partitions) exist on this NATS account: give --log-partitions to say which to read (1 for ${single})`,
      );
    }
    if (given > 1 && recorded !== undefined && given !== recorded) throw mismatch(given, recorded, `${firstOfMany} has metadata ${PARTITIONS_METADATA_KEY}=${text}`);
    return given;
  }
  if (one !== undefined) {
    if (given !== undefined && given !== 1) throw mismatch(given, 1, `its stream is ${single}, unpartitioned; there is no ${firstOfMany}`);
    return 1;
  }
  if (recorded === undefined) {
    if (given !== undefined && given > 1) return given;
    const what = text === undefined ? `has no metadata ${PARTITIONS_METADATA_KEY}` : `has metadata ${PARTITIONS_METADATA_KEY}=${JSON.stringify(text.slice(0, 20))}, not a count from 2 to ${MAX_PARTITIONS}`;
    throw new InspectError(InspectErrorCode.invalidArgument, `${firstOfMany} ${what}, so the partition count cannot be read from the deployment: give --log-partitions (the gateways' count)${given === 1 ? `, not 1: there is no ${single}` : ''}`);
  }
  if (given !== undefined && given !== recorded) throw mismatch(given, recorded, `${firstOfMany} has metadata ${PARTITIONS_METADATA_KEY}=${text}`);
  return recorded;
}

function mismatch(given: number, found: number, why: string): InspectError {
  return new InspectError(
    InspectErrorCode.invalidArgument,
    `--log-partitions ${given} disagrees with the deployment, whose log has ${found} partition(s) (${why}): ` +
      `sessions are placed by a hash of their id modulo the count, so ${given} would look for them where they are not. Give --log-partitions ${found}, or leave it out to read the count from the deployment`,
  );
}
