import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkResumeAcrossInstances, startSdkServer } from '../../../packages/probe/test/zoo/index.js';
import type { ZooHandle } from '../../../packages/probe/test/zoo/index.js';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

let upstream: ZooHandle;
let stack: InProcessStack;
beforeAll(async () => {
  upstream = await startSdkServer();
  stack = await startInProcessStack({ gateways: 2, upstreamUrl: upstream.url });
});
afterAll(async () => {
  await stack?.teardown();
  await upstream?.close();
});

describe('the resume guard and the probe accept the gateway across instances', () => {
  it('guarded SDK client behind a round robin and tether-probe --via: no problems, classification correct', async () => {
    const result = await checkResumeAcrossInstances({ urls: [stack.urls[0]!, stack.urls[1]!] });
    expect(result.problems).toEqual([]);
    expect(result.probe.classification).toBe('correct');
    expect(result.probe.verdict).toBe('resumed');
    // The gateway answers bad cursors explicitly, unlike the SDK's own store.
    expect(result.probe.unknownCursor).toMatchObject({ explicit: true });
    expect(result.probe.malformedCursor).toMatchObject({ status: 400, explicit: true });
  });
});
