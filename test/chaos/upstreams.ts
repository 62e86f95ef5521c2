/**
 * Which upstreams a chaos run puts behind the gateways (`--upstreams`),
 * each on its route (`Routes`): the test kit's two (`kit`: `store` with
 * the SDK's event store on `/mcp`, `plain` without one on `/plain/mcp`),
 * the reference server (`everything`, `/everything/mcp`) and an SDK v2
 * `createMcpHandler` server (`v2`, `/v2/mcp`). `stack.ts` starts them.
 */

/** An upstream, named as its route is (`Routes`). */
export type UpstreamName = 'store' | 'plain' | 'everything' | 'v2';

/** What `--upstreams` names: `kit` is the test kit's two. */
export type UpstreamSet = 'kit' | 'everything' | 'v2';

export const UPSTREAM_SETS: readonly UpstreamSet[] = ['kit', 'everything', 'v2'];

/** The upstreams a selection starts, in a fixed order (`upstream_restart` picks among them by index): with `kit` alone, `store`, `plain`, as before. */
export function upstreamNamesOf(sets: readonly UpstreamSet[]): UpstreamName[] {
  return UPSTREAM_SETS.filter((set) => sets.includes(set)).flatMap((set): UpstreamName[] => (set === 'kit' ? ['store', 'plain'] : [set]));
}

/**
 * `--upstreams kit,everything,v2`: one or more of the sets, comma separated,
 * `all` for every one.
 *
 * @throws Error naming the bad part
 */
export function parseUpstreamSets(spec: string): UpstreamSet[] {
  const out = new Set<UpstreamSet>();
  for (const part of spec.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    if (part === 'all') for (const set of UPSTREAM_SETS) out.add(set);
    else if ((UPSTREAM_SETS as readonly string[]).includes(part)) out.add(part as UpstreamSet);
    else throw new Error(`--upstreams: unknown upstream ${JSON.stringify(part)}; one or more of ${UPSTREAM_SETS.join(', ')}, or all`);
  }
  if (out.size === 0) throw new Error('--upstreams: no upstream named');
  return UPSTREAM_SETS.filter((set) => out.has(set));
}
