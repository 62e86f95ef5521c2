import { decodeEventId } from '@tether/protocol';
import type { EventId } from '@tether/protocol';

/**
 * How much an event id tells about order. The guard can check contiguity only
 * for ids whose format it knows:
 * - `tether`: `<epoch>-<stream>-<seq>-<pos>` (DESIGN §5); `seq` has no holes.
 * - `numeric`: a plain decimal counter (`0`, `1`, `2`…), as many servers send.
 * - `opaque`: anything else (e.g. the SDK example store's `<stream>_<ms>_<rand>`);
 *   only freshness can be checked: an opaque id must not repeat.
 */
export type IdShape =
  | { readonly kind: 'tether'; readonly id: EventId }
  | { readonly kind: 'numeric'; readonly n: number }
  | { readonly kind: 'opaque' };

export type IdKind = IdShape['kind'];

const NUMERIC_RE = /^(0|[1-9][0-9]{0,15})$/;

/** Reads the shape of an SSE id. Total: never throws. */
export function shapeOf(id: string): IdShape {
  const t = decodeEventId(id);
  if (t.ok) return { kind: 'tether', id: t.value };
  if (NUMERIC_RE.test(id)) {
    const n = Number(id);
    if (Number.isSafeInteger(n)) return { kind: 'numeric', n };
  }
  return { kind: 'opaque' };
}

/** The id that must follow `id` on the same stream, when its format says; undefined for opaque ids. */
export function successorOf(shape: IdShape): string | undefined {
  if (shape.kind === 'numeric') return String(shape.n + 1);
  if (shape.kind === 'tether') {
    // pos of the next event is unknown (other streams interleave), so name it by seq only.
    return `${shape.id.epoch}-${shape.id.stream}-${shape.id.seq + 1}-*`;
  }
  return undefined;
}

/** The per-stream counter an id carries: a Tether id's `seq`, a numeric id's value; undefined for opaque ids. */
export function seqOf(shape: IdShape): number | undefined {
  if (shape.kind === 'tether') return shape.id.seq;
  if (shape.kind === 'numeric') return shape.n;
  return undefined;
}

/**
 * Distance from `from` to `to` on one stream: 1 means contiguous, > 1 a gap,
 * <= 0 a regression. Undefined when the two ids are not comparable (opaque,
 * different formats, or Tether ids of another epoch or stream).
 */
export function stepBetween(from: IdShape, to: IdShape): number | undefined {
  if (from.kind === 'numeric' && to.kind === 'numeric') return to.n - from.n;
  if (from.kind === 'tether' && to.kind === 'tether') {
    if (from.id.epoch !== to.id.epoch || from.id.stream !== to.id.stream) return undefined;
    return to.id.seq - from.id.seq;
  }
  return undefined;
}

/** Why two ids cannot be from the same log, or undefined when they can. */
export function foreignReason(from: IdShape, to: IdShape): string | undefined {
  if (from.kind !== to.kind) return `the id format changed from ${from.kind} to ${to.kind}`;
  if (from.kind === 'tether' && to.kind === 'tether') {
    if (from.id.epoch !== to.id.epoch) return `the epoch changed from ${from.id.epoch} to ${to.id.epoch}`;
    if (from.id.stream !== to.id.stream) return `the stream changed from ${from.id.stream} to ${to.id.stream}`;
  }
  return undefined;
}

/**
 * A short digest of an event's data (32-bit FNV-1a over UTF-16 code units).
 * It lets the guard tell a replay (same id, same event) from a fork (same id,
 * another event) without keeping payloads in memory.
 */
export function digestOf(data: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < data.length; i++) {
    h ^= data.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}
