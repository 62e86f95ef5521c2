/**
 * The container images of deploy/docker, built and started for real:
 * `npm run images` (scripts/images.sh) makes the local bases (Debian minbase
 * and Node 24, scripts/image-base.sh), builds every image with buildah,
 * looks inside each, and starts each one's entry point against a real
 * nats-server: health from outside and its own HEALTHCHECK inside, uid
 * 65532, exit 0 on SIGTERM. See deploy/README.md, "Building and starting
 * the images here".
 *
 * Not in npm test (`.build.ts` is no `*.test.ts`, so npm test's projects
 * never pick it up): a run took 6 to 9.5 minutes with the bases cached and
 * 15 on a fresh machine (deploy/README.md), as long as npm test itself, and
 * its builds would load the disk, the CPU and the network under npm test's
 * timing-bound suites. `.ci/run` runs it after npm test, with its own config:
 *   npm run test:images   (vitest run --config test/deploy/images.vitest.config.ts)
 * Needs root, buildah and debootstrap. Without them it skips, loudly; under
 * CI=true a missing one is a failure (.ci/run installs both).
 */
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const IMAGES = ['gateway', 'session-log', 'inspect', 'sdk-example', 'demo-upstream'];
/** Each image stays under this (runtime base 137 MB; the largest, sdk-example, 201 MB): a dev dependency or a build tool that slipped in would pass it. */
const MAX_IMAGE_MB = 250;

const onPath = (tool: string): boolean => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
const reasons = [
  ...['buildah', 'debootstrap'].filter((tool) => !onPath(tool)).map((tool) => `${tool} is not installed`),
  ...(process.getuid?.() === 0 ? [] : ['not root']),
];
const CI = process.env['CI'] === 'true';
const SKIP_TITLE = `SKIPPED: ${reasons.join(', ')}, so the images of deploy/docker are NOT built or started (as root: apt-get install -y buildah debootstrap; .ci/run installs them)`;
const skip = reasons.length > 0 && !CI;
if (skip) console.warn(`\n[test/deploy] ${SKIP_TITLE}\n`);

const TIMEOUT_MS = 45 * 60_000;

/**
 * Runs `npm run images`, its output passed through live and kept. In a
 * process group of its own, sent SIGTERM a minute before the test's timeout:
 * the script's traps then remove its containers and stop its processes.
 */
function runImages(): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', 'images'], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const timer = setTimeout(() => {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGTERM');
    }, TIMEOUT_MS - 60_000);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      process.stdout.write(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      process.stderr.write(chunk);
    });
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe.skipIf(skip)(skip ? SKIP_TITLE : 'npm run images: every image of deploy/docker built with buildah and started against a real nats-server', () => {
  it('builds each image on the local bases, keeps it small and clean, and starts it healthy as uid 65532', { timeout: TIMEOUT_MS }, async () => {
    expect(reasons, 'CI=true: a missing tool is a failure here, not a skip (.ci/run installs buildah and debootstrap)').toEqual([]);
    const { code, output } = await runImages();
    expect(code, output.split('\n').filter((l) => /FAIL/.test(l)).join('\n')).toBe(0);
    for (const name of IMAGES) {
      expect(output, `${name} started and checked`).toMatch(new RegExp(`\\] ok   ${name}: healthy in \\d+s .*uid 65532, exit 0`));
      const size = new RegExp(`^localhost/tether-${name}:local\\s+([\\d.]+) MB`, 'm').exec(output);
      expect(size, `${name}'s size line`).not.toBeNull();
      expect(Number(size![1]), `${name}'s size (MB)`).toBeLessThan(MAX_IMAGE_MB);
    }
  });
});
