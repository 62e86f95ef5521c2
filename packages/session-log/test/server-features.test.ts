import { describe, expect, it } from 'vitest';
import { logPaths, serverFeatures } from '@tether/session-log';

describe('serverFeatures', () => {
  it('2.9.10 (Debian 12): nothing optional, the consumer and leader-get paths', () => {
    const f = serverFeatures('2.9.10');
    expect(f).toEqual({ version: '2.9.10', batchDirectGet: false, subjectSequenceFencing: false, perSubjectIndex: false, perMessageTtl: false, atomicBatchPublish: false });
    expect(logPaths(f, true)).toEqual({ replay: 'consumer', classify: 'msg-get' });
  });

  it('each feature starts at the release that shipped it', () => {
    expect(serverFeatures('2.9.20').subjectSequenceFencing).toBe(false);
    expect(serverFeatures('2.9.21').subjectSequenceFencing).toBe(true);
    expect(serverFeatures('2.10.29')).toMatchObject({ perSubjectIndex: true, batchDirectGet: false });
    expect(serverFeatures('2.11.0')).toMatchObject({ batchDirectGet: true, perMessageTtl: true, atomicBatchPublish: false });
    expect(serverFeatures('2.12.1').atomicBatchPublish).toBe(true);
    expect(serverFeatures('3.0.0').batchDirectGet).toBe(true);
  });

  it('2.15.1: the direct paths, unless the stream refuses direct gets', () => {
    expect(logPaths(serverFeatures('2.15.1'), true)).toEqual({ replay: 'direct-batch', classify: 'direct-batch' });
    expect(logPaths(serverFeatures('2.15.1'), false)).toEqual({ replay: 'consumer', classify: 'msg-get' });
  });

  it('an unreadable version gets the floor, never a guess', () => {
    for (const v of [undefined, '', 'dev', '2.x']) expect(serverFeatures(v)).toMatchObject({ version: 'unknown', batchDirectGet: false });
    expect(serverFeatures('v2.11.3-beta.1')).toMatchObject({ batchDirectGet: true });
  });
});
