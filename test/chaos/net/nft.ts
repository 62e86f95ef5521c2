/**
 * Network faults from nftables rules inside the hosts' own namespaces (the
 * kernel here has no netem; TOOLCHAIN.md, "Network namespaces and faults"):
 *
 * - a full partition between two sets of hosts: each host drops what comes
 *   from the other side (`ip saddr { … } drop` on input);
 * - a one-way partition `from → to`: the `to` hosts drop what `from` sends
 *   (so `to`'s answers reach `from`, nothing of `from` reaches `to`: TCP to
 *   and from it stalls, but `from` still hears `to`'s retransmissions);
 * - loss on one link: both ends drop `numgen random mod 100 < N` of what
 *   the other sends;
 * - duplication on one link: both ends send a copy of `N`% of their packets
 *   to the other (`dup to <peer> device eth0`, which nft allows only in an
 *   `ip` family table).
 *
 * Each host gets two tables at its first fault, `inet tether_chaos` (input
 * drops) and `ip tether_chaos_dup` (output copies); each rule is added with
 * `--echo --handle` and removed by its handle, so faults overlap and heal
 * one by one. `healAll` removes whatever is left (the tables go with the
 * namespaces anyway). Every `nft` refusal is thrown with its stderr.
 */
import type { HostNetwork } from './hosts.js';
import { NetError, NetErrorCode, toolPath } from './hosts.js';

const TABLE = 'tether_chaos';
const DUP_TABLE = 'tether_chaos_dup';

/** One applied fault: its rules, and how to remove them. */
export interface NetFault {
  /** `partition gw1 | nats1,nats2,nats3`, … */
  readonly describe: string;
  /** Rules added (host and handle), for the report. */
  readonly rules: ReadonlyArray<{ readonly host: string; readonly rule: string }>;
  /** Removes its rules; idempotent; never throws (failures are returned). */
  heal(): Promise<string[]>;
}

export interface NetFaults {
  partition(a: readonly string[], b: readonly string[]): Promise<NetFault>;
  /** Nothing `from` sends reaches `to`. */
  oneWay(from: readonly string[], to: readonly string[]): Promise<NetFault>;
  /** `percent` (1-100) of the packets between `a` and `b` dropped, each way, at random. */
  loss(a: string, b: string, percent: number): Promise<NetFault>;
  /** `percent` (1-100) of the packets between `a` and `b` sent twice, each way. */
  duplicate(a: string, b: string, percent: number): Promise<NetFault>;
  /** Heals every fault still applied. */
  healAll(): Promise<string[]>;
  /** Faults applied and not healed yet. */
  readonly active: readonly NetFault[];
}

export function createNetFaults(net: HostNetwork): NetFaults {
  const ready = new Map<string, Promise<void>>();
  const active = new Set<NetFault>();
  const nft = (host: string, args: readonly string[]): Promise<string> => net.exec(host, toolPath('nft') ?? 'nft', args);

  /** Both tables and their chains in `host`, once. */
  const prepare = (host: string): Promise<void> => {
    let p = ready.get(host);
    if (p === undefined) {
      p = (async () => {
        await nft(host, ['add', 'table', 'inet', TABLE]);
        await nft(host, ['add', 'chain', 'inet', TABLE, 'input', '{ type filter hook input priority 0; policy accept; }']);
        await nft(host, ['add', 'table', 'ip', DUP_TABLE]);
        await nft(host, ['add', 'chain', 'ip', DUP_TABLE, 'output', '{ type filter hook output priority 0; policy accept; }']);
      })();
      ready.set(host, p);
      p.catch(() => ready.delete(host));
    }
    return p;
  };

  /** Adds one rule and returns its handle (from `--echo --handle`). */
  const addRule = async (host: string, family: 'inet' | 'ip', table: string, chain: string, rule: string[]): Promise<number> => {
    await prepare(host);
    const out = await nft(host, ['--echo', '--handle', 'add', 'rule', family, table, chain, ...rule]);
    const m = /# handle (\d+)/.exec(out);
    if (m === null) throw new NetError(NetErrorCode.CommandFailed, `nft in ${host} added a rule but printed no handle: ${out.trim()}`);
    return Number(m[1]);
  };

  const apply = async (describe: string, rules: Array<{ host: string; family: 'inet' | 'ip'; table: string; chain: string; rule: string[] }>): Promise<NetFault> => {
    const added: Array<{ host: string; family: 'inet' | 'ip'; table: string; chain: string; handle: number; rule: string }> = [];
    let healed: Promise<string[]> | undefined;
    const fault: NetFault = {
      describe,
      get rules() {
        return added.map((r) => ({ host: r.host, rule: `${r.rule} (handle ${r.handle})` }));
      },
      heal() {
        healed ??= (async () => {
          active.delete(fault);
          const errors: string[] = [];
          for (const r of added) {
            try {
              await nft(r.host, ['delete', 'rule', r.family, r.table, r.chain, 'handle', String(r.handle)]);
            } catch (err) {
              errors.push(`${r.host}: ${(err as Error).message}`);
            }
          }
          return errors;
        })();
        return healed;
      },
    };
    active.add(fault);
    try {
      for (const r of rules) added.push({ ...r, handle: await addRule(r.host, r.family, r.table, r.chain, r.rule), rule: r.rule.join(' ') });
    } catch (err) {
      // Half a fault is no fault: remove what made it in, then say what refused.
      await fault.heal();
      throw err;
    }
    return fault;
  };

  const addresses = (hosts: readonly string[]): string => `{ ${hosts.map((h) => net.host(h).address).join(', ')} }`;
  const drop = (at: string, from: readonly string[], extra: string[] = []) => ({ host: at, family: 'inet' as const, table: TABLE, chain: 'input', rule: ['ip', 'saddr', addresses(from), ...extra, 'drop'] });
  const percentOf = (percent: number): number => {
    if (!(Number.isInteger(percent) && percent >= 1 && percent <= 100)) throw new RangeError(`percent must be an integer from 1 to 100, got ${percent}`);
    return percent;
  };
  /** `numgen random mod 100 < N` (nft takes 0-99 there: 100% is no test at all). */
  const sample = (percent: number): string[] => (percent === 100 ? [] : ['numgen', 'random', 'mod', '100', '<', String(percent)]);
  const disjoint = (a: readonly string[], b: readonly string[]): void => {
    if (a.length === 0 || b.length === 0) throw new RangeError('a partition needs hosts on both sides');
    const overlap = a.filter((h) => b.includes(h));
    if (overlap.length > 0) throw new RangeError(`a host cannot be on both sides: ${overlap.join(', ')}`);
  };

  return {
    get active() {
      return [...active];
    },
    partition(a, b) {
      disjoint(a, b);
      return apply(`partition ${a.join(',')} | ${b.join(',')}`, [...a.map((h) => drop(h, b)), ...b.map((h) => drop(h, a))]);
    },
    oneWay(from, to) {
      disjoint(from, to);
      return apply(`one-way ${from.join(',')} -> ${to.join(',')} dropped`, to.map((h) => drop(h, from)));
    },
    loss(a, b, percent) {
      disjoint([a], [b]);
      const n = String(percentOf(percent));
      return apply(`loss ${n}% ${a} <-> ${b}`, [drop(a, [b], sample(percent)), drop(b, [a], sample(percent))]);
    },
    duplicate(a, b, percent) {
      disjoint([a], [b]);
      const n = String(percentOf(percent));
      const dup = (from: string, to: string) => ({
        host: from,
        family: 'ip' as const,
        table: DUP_TABLE,
        chain: 'output',
        rule: ['ip', 'daddr', net.host(to).address, ...sample(percent), 'dup', 'to', net.host(to).address, 'device', 'eth0'],
      });
      return apply(`duplicate ${n}% ${a} <-> ${b}`, [dup(a, b), dup(b, a)]);
    },
    async healAll() {
      const errors: string[] = [];
      for (const fault of [...active]) errors.push(...(await fault.heal()));
      return errors;
    },
  };
}
