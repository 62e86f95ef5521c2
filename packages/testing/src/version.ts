import { execFileSync } from 'node:child_process';
import { TestingError, TestingErrorCodes } from './errors.js';

/**
 * The oldest nats-server Tether runs on. Issue 24 raised it from 2.9.10: a
 * 2.9.10 cluster lost acknowledged events to a power loss (docs/reliability.md,
 * finding 5), and the log's read and fencing paths need 2.11's batch direct get.
 */
export const MIN_NATS_SERVER_VERSION = { major: 2, minor: 11 } as const;

const versions = new Map<string, string>();

/** Whether a nats-server version (`2.15.1`, as `natsServerVersion` reports it) is at least `major.minor`. */
export function natsVersionAtLeast(version: string, major: number, minor: number): boolean {
  const [a = 0, b = 0] = version.split('.').map(Number);
  return a !== major ? a > major : b >= minor;
}

/**
 * The version a nats-server binary reports (`nats-server: v2.15.1` → `2.15.1`),
 * cached per path. Tests name it when they skip for a missing feature.
 *
 * @throws TestingError `nats_server_start_failed` when the binary prints no version
 */
export function natsServerVersion(bin: string): string {
  let version = versions.get(bin);
  if (version === undefined) {
    const out = execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 10_000 });
    const match = /v(\d+\.\d+\.\d+\S*)/.exec(out);
    if (match?.[1] === undefined) throw new TestingError(TestingErrorCodes.NatsServerStartFailed, `${bin} --version printed no version: ${JSON.stringify(out.slice(0, 200))}`);
    version = match[1];
    versions.set(bin, version);
  }
  return version;
}
