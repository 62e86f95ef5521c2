/**
 * The event store of the MCP reference server, `@modelcontextprotocol/server-everything`
 * (its Streamable HTTP transport, dist/transports/streamableHttp.js). It is
 * not the SDK's `InMemoryEventStore`: the file declares its own
 * `class InMemoryEventStore` (random UUID ids, one `Map` per session in
 * insertion order; a replay copies the map to an array, finds the cursor by
 * a linear scan, then sends every later event of the session, of every
 * stream, and returns the last id sent, not a stream id; a cursor it does
 * not hold returns that cursor with nothing sent). The class is not
 * exported, and importing the file starts an Express server on port 3001,
 * so the class is taken from the installed package's file at run time
 * (never a copy in this repo) and compiled on its own, with the
 * `randomUUID` the file imports from `node:crypto`.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { compileFunction } from 'node:vm';
import type { BenchEventStore } from '../sdk/stores.js';

const PACKAGE = '@modelcontextprotocol/server-everything';
const FILE = 'dist/transports/streamableHttp.js';
const CLASS = 'class InMemoryEventStore {';

export interface EverythingStoreSource {
  readonly version: string;
  /** The file the class was read from. */
  readonly file: string;
  /** The class's source text, as compiled. */
  readonly source: string;
}

let loaded: { create: () => BenchEventStore; info: EverythingStoreSource } | undefined;

/** The package's version and the file its store came from (loads it on first use). */
export function everythingStoreSource(): EverythingStoreSource {
  return load().info;
}

/** A fresh instance of server-everything's store (the server makes one per session). */
export function newEverythingStore(): BenchEventStore {
  return load().create();
}

function load(): NonNullable<typeof loaded> {
  if (loaded !== undefined) return loaded;
  const require = createRequire(import.meta.url);
  const pkgJson = require.resolve(`${PACKAGE}/package.json`);
  const version = String((JSON.parse(readFileSync(pkgJson, 'utf8')) as { version?: unknown }).version);
  const file = join(dirname(pkgJson), FILE);
  const text = readFileSync(file, 'utf8');
  if (!/import\s*\{\s*randomUUID\s*\}\s*from\s*["']node:crypto["']/.test(text)) throw new Error(`${file} no longer imports randomUUID from node:crypto: check how its store makes ids before measuring it`);
  const source = classText(text, file);
  const Store = compileFunction(`${source}\nreturn InMemoryEventStore;`, ['randomUUID'], { filename: file })(randomUUID) as new () => BenchEventStore;
  const probe = new Store();
  if (typeof probe.storeEvent !== 'function' || typeof probe.replayEventsAfter !== 'function') throw new Error(`${file}: InMemoryEventStore lacks storeEvent/replayEventsAfter`);
  loaded = { create: () => new Store(), info: { version, file, source } };
  return loaded;
}

/** `class InMemoryEventStore { … }` up to its matching brace (the class holds no braces in strings or comments; compiling it checks the cut). */
function classText(text: string, file: string): string {
  const start = text.indexOf(CLASS);
  if (start < 0) throw new Error(`${file} declares no "${CLASS}": the reference server changed its store; read the file again`);
  let depth = 0;
  for (let i = start + CLASS.length - 1; i < text.length; i += 1) {
    const c = text[i];
    if (c === '{') depth += 1;
    else if (c === '}') {
      depth -= 1;
      if (depth === 0) return text.slice(start, i + 1);
    }
  }
  throw new Error(`${file}: no end to ${CLASS}`);
}
