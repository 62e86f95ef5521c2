import { randomUUID } from 'node:crypto';
import { isTetherSdkError, SDK_GET_STREAM } from '@tether/sdk';
import { newSdkStore, notification } from './stores.js';
import type { BenchEventStore, StoreKind, TetherSide } from './stores.js';

/** What a store does with one kind of cursor: not a timing, a fact printed beside the figures. */
export interface CursorProbe {
  readonly store: StoreKind;
  readonly cursor: string;
  /** `returned "<stream id>"`, or `threw <code> (<verdict>)`. */
  readonly outcome: string;
  readonly sent: number;
}

/**
 * Cursors a resume can meet besides a good one: one the store never held (an
 * instance restarted, or the client's previous request went to another
 * instance), one of another session, a garbage string, and a good cursor of
 * the standalone GET stream.
 */
export async function probeCursors(side: TetherSide): Promise<CursorProbe[]> {
  const out: CursorProbe[] = [];
  const tether = await side.newStore();
  const other = await side.newStore();
  const post = randomUUID();
  await tether.storeEvent(post, notification(post, 0));
  const foreign = await other.storeEvent(post, notification(post, 0));
  const tetherGet = await tether.storeEvent(SDK_GET_STREAM, notification(SDK_GET_STREAM, 0));
  await tether.storeEvent(SDK_GET_STREAM, notification(SDK_GET_STREAM, 1));

  const sdk = newSdkStore();
  const sdkOther = newSdkStore();
  await sdk.storeEvent(post, notification(post, 0));
  const sdkForeign = await sdkOther.storeEvent(post, notification(post, 0));
  const sdkGet = await sdk.storeEvent(SDK_GET_STREAM, notification(SDK_GET_STREAM, 0));
  await sdk.storeEvent(SDK_GET_STREAM, notification(SDK_GET_STREAM, 1));

  const cases: readonly [string, StoreKind, BenchEventStore, string][] = [
    ['held by another store (instance restarted / other instance)', 'tether', tether, foreign],
    ['held by another store (instance restarted / other instance)', 'sdk', sdk, sdkForeign],
    ['garbage ("not-a-cursor")', 'tether', tether, 'not-a-cursor'],
    ['garbage ("not-a-cursor")', 'sdk', sdk, 'not-a-cursor'],
    [`good cursor on the GET stream (${SDK_GET_STREAM}), 1 event after it`, 'tether', tether, tetherGet],
    [`good cursor on the GET stream (${SDK_GET_STREAM}), 1 event after it`, 'sdk', sdk, sdkGet],
  ];
  for (const [cursor, store, s, id] of cases) {
    // A stream that never ends (the GET stream) is followed live: one more event, sent after the wait, ends the probe.
    const unblock = () => s.storeEvent(SDK_GET_STREAM, notification(SDK_GET_STREAM, 2));
    out.push({ store, cursor, ...(await replayOutcome(s, id, unblock)) });
  }
  return out;
}

/** How long a replay may take before the probe calls it "still open". */
const OPEN_AFTER_MS = 2_000;

async function replayOutcome(store: BenchEventStore, cursor: string, unblock: () => Promise<unknown>): Promise<{ outcome: string; sent: number }> {
  let sent = 0;
  let stopped = false;
  const stop = new Error('probe over');
  const replay = store
    .replayEventsAfter(cursor, {
      send: async () => {
        if (stopped) throw stop;
        sent += 1;
      },
    })
    .then((stream) => ({ outcome: `returned ${JSON.stringify(stream)}`, sent }))
    .catch((err: unknown) => {
      if (err === stop) return { outcome: `still open after ${OPEN_AFTER_MS} ms (follows the stream live; never resolves while it has no end)`, sent };
      if (isTetherSdkError(err)) return { outcome: `threw ${err.code} (${String(err.fields.verdict ?? '')})`, sent };
      return { outcome: `threw ${String(err)}`, sent };
    });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), OPEN_AFTER_MS)));
  const first = await Promise.race([replay, late]);
  clearTimeout(timer);
  if (first !== 'late') return first;
  stopped = true;
  await unblock();
  return replay;
}
