import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, startServiceProcess } from '@tether/testing';
import type { NatsServer, ServiceProcess } from '@tether/testing';
import { FLAGS } from '../src/config.js';
import { assertBuilt, EXAMPLE_MAIN } from './fleet.js';

/** Runs the bin's target to its exit: code, stdout, stderr. */
function run(args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [EXAMPLE_MAIN, ...args], { env: { ...process.env, CI: '1', ...env } }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : null, stdout, stderr });
    });
  });
}

describe('tether-sdk-example command line', () => {
  beforeAll(() => assertBuilt());

  it('--help lists every flag and exits 0', async () => {
    const { code, stdout } = await run(['--help']);
    expect(code).toBe(0);
    for (const { flag, env } of FLAGS) {
      expect(stdout).toContain(`--${flag}`);
      expect(stdout).toContain(env);
    }
    expect(stdout).toContain('--help');
  });

  it.each([
    [['--bogus', '1'], /unknown flag --bogus/],
    [['--port', 'abc'], /invalid --port "abc"; allowed: an integer from 0 to 65535/],
    [['--port', '70000'], /invalid --port "70000"/],
    [['--nats', 'http://127.0.0.1:4222'], /invalid --nats "http:\/\/127.0.0.1:4222"/],
    [['--writer-check-ms', '5000', '--writer-silence-ms', '1000'], /invalid --writer-silence-ms 1000; allowed: at least --writer-check-ms/],
    [['--port'], /flag --port needs a value/],
    [['serve'], /unexpected argument "serve"/],
    [['--auth', 'jwt', '--auth-issuer', 'https://as.example.test'], /--auth jwt needs --auth-jwks-url and --auth-audience/],
    [['--auth', 'basic'], /invalid --auth "basic"; allowed: none or jwt/],
    [['--log-partitions', '0'], /invalid --log-partitions "0"; allowed: an integer from 1 to 256/],
    [['--log-placement-tags', 'eu,a b'], /invalid --log-placement-tags "a b"; allowed: server tags of 1 to 64 letters/],
  ])('%j: a clear error on stderr, exit 2', async (args, message) => {
    const { code, stderr, stdout } = await run(args);
    expect(stderr).toMatch(message);
    expect(stderr).toMatch(/^tether-sdk-example: /);
    expect(stdout).toBe('');
    expect(code).toBe(2);
  });

  it('an environment value is checked like a flag', async () => {
    const { code, stderr } = await run([], { PORT: 'x' });
    expect(stderr).toMatch(/invalid --port "x"/);
    expect(code).toBe(2);
  });

  describe('running', () => {
    let nats: NatsServer;
    let instance: ServiceProcess;
    beforeAll(async () => {
      nats = await startNatsServer();
      instance = await startServiceProcess({
        name: 'sdk-example',
        command: process.execPath,
        args: [EXAMPLE_MAIN, '--port', '0', '--nats', nats.url, '--instance', 'cli'],
        env: { CI: '1' },
        readyLine: (o) => o.msg === 'listening',
      });
    });
    afterAll(async () => {
      await instance?.stop();
      await nats?.cleanup();
    });

    it('prints one JSON ready line and answers GET /healthz; other paths are 404', async () => {
      expect(instance.readyJson).toMatchObject({ msg: 'listening', instance: 'cli', url: `http://127.0.0.1:${instance.port}/mcp` });
      const health = await fetch(`http://127.0.0.1:${instance.port}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok', instance: 'cli' });
      expect((await fetch(`http://127.0.0.1:${instance.port}/other`)).status).toBe(404);
    });

    it('SIGTERM stops it with exit 0', async () => {
      const status = await instance.stop('SIGTERM');
      expect(status).toEqual({ code: 0, signal: null });
      expect(instance.stdoutJson.some((o) => o['msg'] === 'stopping')).toBe(true);
    });
  });

  it('an unreachable NATS server: a fatal line naming it, exit 1', async () => {
    const { code, stdout } = await run(['--port', '0', '--nats', 'nats://127.0.0.1:1']);
    expect(code).toBe(1);
    const line = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
    expect(line).toMatchObject({ msg: 'failed to start', code: 'log_unavailable' });
    expect(String(line['err'])).toContain('cannot connect to NATS at nats://127.0.0.1:1');
  });
});
