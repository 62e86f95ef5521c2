/**
 * Where the heap of idle streams goes: reads two V8 heap snapshots (taken by
 * the idle-streams figure with BENCH_GATEWAY_HEAP_SNAPSHOT=<prefix>, before
 * and after the GET streams opened) and prints, per stream, the growth of
 * self size and count by constructor (objects by constructor name, closures
 * by function name, other kinds by their type), largest first; then the
 * retained size (dominator tree) of the after snapshot's objects, summed by
 * constructor, for the constructors that grew by about one per stream.
 *
 *   npx tsx test/bench/gateway/heap-diff.ts before.heapsnapshot after.heapsnapshot <streams> [rows]
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  readonly nodeCount: number;
  readonly fieldCount: number;
  readonly nodes: Uint32Array;
  readonly edges: Uint32Array;
  readonly edgeFieldCount: number;
  readonly strings: readonly string[];
  readonly typeNames: readonly string[];
  readonly edgeTypeNames: readonly string[];
  readonly idx: { type: number; name: number; selfSize: number; edgeCount: number };
  readonly eidx: { type: number; toNode: number };
}

function load(file: string): Snapshot {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
    nodes: number[];
    edges: number[];
    strings: string[];
  };
  const { meta } = raw.snapshot;
  const f = meta.node_fields;
  const ef = meta.edge_fields;
  return {
    nodeCount: raw.nodes.length / f.length,
    fieldCount: f.length,
    nodes: Uint32Array.from(raw.nodes),
    edges: Uint32Array.from(raw.edges),
    edgeFieldCount: ef.length,
    strings: raw.strings,
    typeNames: meta.node_types[0],
    edgeTypeNames: meta.edge_types[0],
    idx: { type: f.indexOf('type'), name: f.indexOf('name'), selfSize: f.indexOf('self_size'), edgeCount: f.indexOf('edge_count') },
    eidx: { type: ef.indexOf('type'), toNode: ef.indexOf('to_node') },
  };
}

function keyOf(s: Snapshot, i: number): string {
  const base = i * s.fieldCount;
  const type = s.typeNames[s.nodes[base + s.idx.type]!]!;
  const name = s.strings[s.nodes[base + s.idx.name]!]!;
  if (type === 'object' || type === 'closure' || type === 'native') return `${type}:${name.split(' ')[0]}`;
  if (type === 'hidden' || type === 'array' || type === 'object shape') return `${type}:${name.length > 40 ? name.slice(0, 40) : name}`;
  return type;
}

function bySelf(s: Snapshot): Map<string, { count: number; size: number }> {
  const out = new Map<string, { count: number; size: number }>();
  for (let i = 0; i < s.nodeCount; i++) {
    const k = keyOf(s, i);
    const e = out.get(k) ?? { count: 0, size: 0 };
    e.count += 1;
    e.size += s.nodes[i * s.fieldCount + s.idx.selfSize]!;
    out.set(k, e);
  }
  return out;
}

/** Retained sizes (Cooper–Harvey–Kennedy dominators over weak-edge-free graph, root = node 0). */
function retained(s: Snapshot): Float64Array {
  return dominators(s).size;
}

function dominators(s: Snapshot): { size: Float64Array; idom: Int32Array } {
  const n = s.nodeCount;
  const firstEdge = new Uint32Array(n + 1);
  for (let i = 0; i < n; i++) firstEdge[i + 1] = firstEdge[i]! + s.nodes[i * s.fieldCount + s.idx.edgeCount]!;
  const weak = s.edgeTypeNames.indexOf('weak');
  const shortcut = s.edgeTypeNames.indexOf('shortcut');
  const target = (e: number): number => s.edges[e * s.edgeFieldCount + s.eidx.toNode]! / s.fieldCount;
  const usable = (e: number): boolean => {
    const t = s.edges[e * s.edgeFieldCount + s.eidx.type]!;
    return t !== weak && t !== shortcut;
  };
  // Postorder by iterative DFS from the root.
  const post = new Int32Array(n).fill(-1);
  const order = new Uint32Array(n);
  let count = 0;
  const stack = new Uint32Array(n);
  const cursor = new Uint32Array(n);
  const seen = new Uint8Array(n);
  let sp = 0;
  stack[sp++] = 0;
  seen[0] = 1;
  cursor[0] = firstEdge[0]!;
  while (sp > 0) {
    const v = stack[sp - 1]!;
    if (cursor[v]! < firstEdge[v + 1]!) {
      const e = cursor[v]!;
      cursor[v] = e + 1;
      if (!usable(e)) continue;
      const w = target(e);
      if (seen[w] === 0) {
        seen[w] = 1;
        cursor[w] = firstEdge[w]!;
        stack[sp++] = w;
      }
    } else {
      sp--;
      post[v] = count;
      order[count++] = v;
    }
  }
  // Predecessors (reachable only).
  const predCount = new Uint32Array(n + 1);
  for (let v = 0; v < n; v++) {
    if (seen[v] === 0) continue;
    for (let e = firstEdge[v]!; e < firstEdge[v + 1]!; e++) if (usable(e)) predCount[target(e) + 1]! += 1;
  }
  for (let i = 0; i < n; i++) predCount[i + 1]! += predCount[i]!;
  const preds = new Uint32Array(predCount[n]!);
  const fill = predCount.slice(0, n);
  for (let v = 0; v < n; v++) {
    if (seen[v] === 0) continue;
    for (let e = firstEdge[v]!; e < firstEdge[v + 1]!; e++) if (usable(e)) preds[fill[target(e)]!++] = v;
  }
  const idom = new Int32Array(n).fill(-1);
  idom[0] = 0;
  const intersect = (a: number, b: number): number => {
    while (a !== b) {
      while (post[a]! < post[b]!) a = idom[a]!;
      while (post[b]! < post[a]!) b = idom[b]!;
    }
    return a;
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (let k = count - 1; k >= 0; k--) {
      const v = order[k]!;
      if (v === 0) continue;
      let d = -1;
      for (let p = predCount[v]!; p < predCount[v + 1]!; p++) {
        const u = preds[p]!;
        if (idom[u] === -1) continue;
        d = d === -1 ? u : intersect(u, d);
      }
      if (d !== -1 && idom[v] !== d) {
        idom[v] = d;
        changed = true;
      }
    }
  }
  const size = new Float64Array(n);
  for (let v = 0; v < n; v++) if (seen[v] === 1) size[v] = s.nodes[v * s.fieldCount + s.idx.selfSize]!;
  for (let k = 0; k < count; k++) {
    const v = order[k]!;
    if (v !== 0 && idom[v]! >= 0) size[idom[v]!]! += size[v]!;
  }
  return { size, idom };
}

const [beforeFile, afterFile, streamsArg, rowsArg] = process.argv.slice(2);
if (beforeFile === undefined || afterFile === undefined || streamsArg === undefined) {
  process.stderr.write('usage: heap-diff.ts before.heapsnapshot after.heapsnapshot <streams> [rows]\n');
  process.exit(2);
}
const streams = Number(streamsArg);
const rows = Number(rowsArg ?? 40);
const before = load(beforeFile);
const b = bySelf(before);
const after = load(afterFile);
const a = bySelf(after);
const diff = [...a].map(([k, v]) => {
  const o = b.get(k) ?? { count: 0, size: 0 };
  return { k, count: (v.count - o.count) / streams, size: (v.size - o.size) / streams };
});
diff.sort((x, y) => y.size - x.size);
const total = diff.reduce((t, d) => t + d.size, 0);
process.stdout.write(`self size growth per stream: ${(total / 1024).toFixed(1)} KiB (${streams} streams)\n`);
process.stdout.write(`${'constructor'.padEnd(52)} ${'bytes/stream'.padStart(12)} ${'count/stream'.padStart(12)}\n`);
for (const d of diff.slice(0, rows)) process.stdout.write(`${d.k.padEnd(52)} ${d.size.toFixed(0).padStart(12)} ${d.count.toFixed(2).padStart(12)}\n`);

// Retained size of the objects that come about once per stream.
const { size: sizes, idom } = dominators(after);
// BENCH_HEAP_DOMINATED=Ctor,Ctor: what the instances of these constructors hold alone, by kind, per instance.
for (const ctor of (process.env['BENCH_HEAP_DOMINATED'] ?? '').split(',').filter((c) => c !== '')) {
  const roots = new Set<number>();
  for (let i = 0; i < after.nodeCount; i++) if (keyOf(after, i) === `object:${ctor}`) roots.add(i);
  const held = new Map<string, { count: number; size: number }>();
  for (let i = 0; i < after.nodeCount; i++) {
    // Walk up the dominator tree to the nearest root instance, if any.
    let v = i;
    let steps = 0;
    while (v !== 0 && !roots.has(v) && idom[v]! >= 0 && steps < 64) {
      v = idom[v]!;
      steps += 1;
    }
    if (!roots.has(v) || v === i) continue;
    const k = keyOf(after, i);
    const e = held.get(k) ?? { count: 0, size: 0 };
    e.count += 1;
    e.size += after.nodes[i * after.fieldCount + after.idx.selfSize]!;
    held.set(k, e);
  }
  const n = Math.max(1, roots.size);
  process.stdout.write(`\nheld alone by ${ctor} (${roots.size} instances), per instance:\n`);
  for (const [k, v] of [...held].sort((x, y) => y[1].size - x[1].size).slice(0, 25)) {
    process.stdout.write(`  ${k.padEnd(50)} ${(v.size / n).toFixed(0).padStart(8)} B ${(v.count / n).toFixed(2).padStart(8)}\n`);
  }
}
const perStream = new Set(diff.filter((d) => d.k.startsWith('object:') && d.count >= 0.9 && d.count <= 3.1).map((d) => d.k));
const ret = new Map<string, { count: number; size: number }>();
for (let i = 0; i < after.nodeCount; i++) {
  const k = keyOf(after, i);
  if (!perStream.has(k)) continue;
  const e = ret.get(k) ?? { count: 0, size: 0 };
  e.count += 1;
  e.size += sizes[i]!;
  ret.set(k, e);
}
const retRows = [...ret].map(([k, v]) => ({ k, count: v.count, avg: v.size / v.count })).sort((x, y) => y.avg - x.avg);
process.stdout.write(`\nretained size (after snapshot) of constructors with ~1-3 new per stream, average per instance:\n`);
for (const r of retRows.slice(0, rows)) process.stdout.write(`${r.k.padEnd(52)} ${r.avg.toFixed(0).padStart(12)} B  (${r.count} instances)\n`);
