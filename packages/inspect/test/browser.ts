import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext, Page } from 'playwright-core';

/** Debian's chromium (apt); `TETHER_CHROMIUM` points elsewhere. */
export const CHROMIUM = process.env.TETHER_CHROMIUM ?? '/usr/bin/chromium';

/** Why the browser tests cannot run here, or undefined when they can. */
export const chromiumMissing: string | undefined = existsSync(CHROMIUM)
  ? undefined
  : `Chromium not found at ${CHROMIUM}: the inspector's browser tests are SKIPPED. Install it with ` +
    '`DEBIAN_FRONTEND=noninteractive apt-get install -y chromium` (.ci/run does), or set TETHER_CHROMIUM.';

/**
 * Says loudly that the browser tests skip, and in CI fails instead: .ci/run
 * installs chromium, so a CI run without it has lost the browser test.
 */
export function announceChromium(): void {
  if (chromiumMissing === undefined) return;
  const bar = '!'.repeat(100);
  process.stderr.write(`\n${bar}\n!! ${chromiumMissing}\n${bar}\n\n`);
  if (process.env.CI === 'true') throw new Error(`CI=true and ${chromiumMissing}`);
}

/**
 * The flags Chromium needs on these machines (shared/TOOLCHAIN.md, "A real
 * browser"): as root it needs --no-sandbox, and without the background
 * networking flags it tries hosts it cannot reach. The fresh profile
 * (--user-data-dir) is given by launchPersistentContext.
 */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface OpenBrowser {
  readonly context: BrowserContext;
  readonly page: Page;
  /** Every URL the page requested. */
  readonly requests: string[];
  /** CSP violations and console errors the page reported. */
  readonly problems: string[];
  close(): Promise<void>;
}

export async function openBrowser(): Promise<OpenBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'tether-inspect-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1400, height: 900 },
    deviceScaleFactor: 1,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const requests: string[] = [];
  const problems: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`pageerror: ${err.message}`));
  return {
    context,
    page,
    requests,
    problems,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
