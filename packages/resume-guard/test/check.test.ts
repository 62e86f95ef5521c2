import { describe, expect, it } from 'vitest';
import { encodeResumeAck, SseParser } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';
import { StreamCheck, StreamHistory, shapeOf } from '@tether/resume-guard';

const msg = (id: string | undefined, data = `{"n":"${id ?? '-'}"}`): SseMessage => ({
  id,
  lastEventId: id ?? '',
  event: undefined,
  data,
  hasData: true,
  retryMs: undefined,
});

/** Delivers a fresh stream of `ids` (each with distinct data) and returns its history. */
function delivered(ids: string[], first: SseMessage[] = []): StreamHistory {
  const h = new StreamHistory();
  const c = new StreamCheck(h);
  for (const m of [...first, ...ids.map((id) => msg(id))]) expect(c.push(m)).toBeUndefined();
  c.commit();
  return h;
}

/** The acknowledgment frame as `@tether/protocol` encodes it, parsed. */
function ack(cursor: string, stream: string, nextSeq: number, retryMs?: number): SseMessage {
  const [m] = new SseParser().push(encodeResumeAck({ cursor, stream, nextSeq, ...(retryMs === undefined ? {} : { retryMs }) }));
  return m as SseMessage;
}

function resume(h: StreamHistory, cursor: string, ms: SseMessage[]) {
  const c = new StreamCheck(h, { cursor });
  for (const m of ms) {
    const f = c.push(m);
    if (f !== undefined) return { finding: f, verified: c.verified };
  }
  return { finding: c.end(), verified: c.verified };
}

describe('StreamCheck on numeric ids', () => {
  const h = () => delivered(['1', '2', '3'], []);

  it('accepts last + 1 and is verified from then on', () => {
    const r = resume(h(), '3', [msg('4'), msg('5')]);
    expect(r).toEqual({ finding: undefined, verified: true });
  });

  it('holds a resumed stream until its first event: the resume acknowledgment is not that event', () => {
    const c = new StreamCheck(h(), { cursor: '3' });
    expect(c.push(ack('3', '0', 4))).toBeUndefined();
    expect(c.verified).toBe(false);
    expect(c.ackOnly).toBe(true);
    expect(c.push(msg('4'))).toBeUndefined();
    expect(c.verified).toBe(true);
  });

  it('names a bare repeat of the cursor (empty message event) a replay', () => {
    const { finding } = resume(h(), '3', [msg('3', ''), msg('4')]);
    expect(finding).toMatchObject({ code: 'replay_from_zero', position: 'first', eventId: '3', previousEventId: '3', expectedEventId: '4' });
    expect(finding?.reason).toContain('event: resume');
  });

  it('names a gap at the first event, with the ids involved', () => {
    const { finding } = resume(h(), '3', [msg('7')]);
    expect(finding).toMatchObject({ code: 'gap', position: 'first', eventId: '7', expectedEventId: '4', previousEventId: '3' });
  });

  it('names a gap inside a resumed stream (buffer/log seam)', () => {
    const { finding } = resume(h(), '3', [msg('4'), msg('5'), msg('9')]);
    expect(finding).toMatchObject({ code: 'gap', position: 'within', eventId: '9', previousEventId: '5' });
  });

  it('names a replay when the same events come again', () => {
    const { finding } = resume(h(), '3', [msg('1')]);
    expect(finding).toMatchObject({ code: 'replay_from_zero', eventId: '1' });
  });

  it('names a fork when a held id now carries other data', () => {
    const { finding } = resume(h(), '3', [msg('2', '{"other":true}')]);
    expect(finding).toMatchObject({ code: 'fork', eventId: '2' });
  });

  it('waits past id-only events to tell a replay from a fork', () => {
    const primed = delivered(['2', '3'], [msg('1', '')]);
    expect(resume(primed, '3', [msg('1', ''), msg('2')]).finding).toMatchObject({ code: 'replay_from_zero' });
    expect(resume(primed, '3', [msg('1', ''), msg('2', '{"from":"b"}')]).finding).toMatchObject({ code: 'fork', eventId: '2' });
    // Nothing decisive before the end: the tentative replay stands.
    expect(resume(primed, '3', [msg('1', '')]).finding).toMatchObject({ code: 'replay_from_zero' });
  });

  it('names an id-less event after ids a silent fallback', () => {
    expect(resume(h(), '3', [msg(undefined)]).finding).toMatchObject({ code: 'silent_fallback', position: 'first' });
    const c = new StreamCheck(new StreamHistory());
    expect(c.push(msg('1'))).toBeUndefined();
    expect(c.push(msg(undefined))).toMatchObject({ code: 'silent_fallback', position: 'within' });
  });

  it('ignores blocks that carry nothing: retry hints, empty id-less data', () => {
    const r = resume(h(), '3', [{ ...msg(undefined, ''), retryMs: 100 }, msg('4')]);
    expect(r).toEqual({ finding: undefined, verified: true });
  });

  it('learns session-wide counters from jumps on a fresh stream, and still catches regressions', () => {
    const sparse = delivered(['5', '9', '12']);
    expect(sparse.sparse).toBe(true);
    expect(resume(sparse, '12', [msg('15')]).finding).toBeUndefined();
    expect(resume(sparse, '12', [msg('9')]).finding).toMatchObject({ code: 'replay_from_zero' });
  });

  it('treats id-less SSE as a fallback only where ids were expected', () => {
    const plain = new StreamCheck(new StreamHistory());
    expect(plain.push(msg(undefined))).toBeUndefined();
    const afterJson = new StreamCheck(new StreamHistory(), { expectIds: true });
    expect(afterJson.push(msg(undefined))).toMatchObject({ code: 'silent_fallback' });
  });
});

describe('StreamCheck on Tether ids', () => {
  const id = (seq: number, pos: number, epoch = 'abcdefgh23', stream = 'qrstuvwx') => `${epoch}-${stream}-${seq}-${pos}`;
  const h = () => delivered([id(1, 10), id(2, 14), id(3, 15)]);

  describe('the resume acknowledgment (event: resume)', () => {
    it('is the server\'s resume point: accepted, and the first event after it is checked as usual', () => {
      const c = new StreamCheck(h(), { cursor: id(3, 15) });
      expect(c.push(ack(id(3, 15), 'qrstuvwx', 4, 1000))).toBeUndefined();
      expect(c.ackOnly).toBe(true);
      expect(c.verified).toBe(false);
      expect(c.push(msg(id(4, 40)))).toBeUndefined();
      expect(c.verified).toBe(true);
      // It is not an event: nothing of it is recorded.
      expect(c.commit()).toEqual([id(4, 40)]);
    });

    it('does not cover for what follows it: a gap after it is still a gap', () => {
      expect(resume(h(), id(3, 15), [ack(id(3, 15), 'qrstuvwx', 4), msg(id(6, 40))]).finding).toMatchObject({ code: 'gap', eventId: id(6, 40) });
    });

    it('a bare repeat of the cursor instead (empty message event) is a replay', () => {
      const { finding } = resume(h(), id(3, 15), [msg(id(3, 15), ''), msg(id(4, 40))]);
      expect(finding).toMatchObject({ code: 'replay_from_zero', eventId: id(3, 15), expectedEventId: 'abcdefgh23-qrstuvwx-4-*' });
      // So is the same repeat with the message type spelled out.
      expect(resume(h(), id(3, 15), [{ ...msg(id(3, 15), ''), event: 'message' }]).finding).toMatchObject({ code: 'replay_from_zero' });
    });

    it('refuses malformed data, with a reason that says what is wrong', () => {
      const bad = { ...ack(id(3, 15), 'qrstuvwx', 4), data: '{"verdict":"resumed","stream":"qrstuvwx"}' };
      const { finding, verified } = resume(h(), id(3, 15), [bad, msg(id(4, 40))]);
      expect(verified).toBe(false);
      expect(finding).toMatchObject({ code: 'malformed_ack', position: 'first', eventId: id(3, 15) });
      expect(finding?.reason).toBe("the resume acknowledgment's data is malformed: resume ack has no next_seq");
      expect(resume(h(), id(3, 15), [{ ...bad, data: 'resumed' }]).finding?.reason).toBe("the resume acknowledgment's data is malformed: resume ack data is not JSON");
      expect(resume(h(), id(3, 15), [{ ...bad, data: '' }]).finding?.reason).toBe("the resume acknowledgment's data is malformed: resume ack data is empty");
    });

    it('refuses one without an id, and a second one', () => {
      expect(resume(h(), id(3, 15), [{ ...ack(id(3, 15), 'qrstuvwx', 4), id: undefined }]).finding).toMatchObject({ code: 'malformed_ack' });
      const twice = resume(h(), id(3, 15), [ack(id(3, 15), 'qrstuvwx', 4), ack(id(3, 15), 'qrstuvwx', 4)]).finding;
      expect(twice).toMatchObject({ code: 'malformed_ack', reason: 'a second resume acknowledgment arrived before the first event' });
    });

    it('checks its next_seq against the first event', () => {
      const { finding } = resume(h(), id(3, 15), [ack(id(3, 15), 'qrstuvwx', 9), msg(id(4, 40))]);
      expect(finding).toMatchObject({ code: 'malformed_ack', eventId: id(4, 40), reason: 'the resume acknowledgment announced next_seq 9, the stream went on with seq 4' });
    });

    it('names a stated verdict other than resumed an explicit refusal, with the verdict', () => {
      const truncated = { ...ack(id(3, 15), 'qrstuvwx', 4), data: '{"verdict":"truncated","stream":"qrstuvwx","next_seq":4}' };
      expect(resume(h(), id(3, 15), [truncated]).finding).toMatchObject({ code: 'explicit_refusal', verdict: 'truncated' });
    });

    it('names an acknowledgment of another point what resuming from there would be', () => {
      expect(resume(h(), id(3, 15), [ack(id(1, 10), 'qrstuvwx', 2)]).finding).toMatchObject({ code: 'replay_from_zero', eventId: id(1, 10) });
      expect(resume(h(), id(3, 15), [ack(id(5, 30), 'qrstuvwx', 6)]).finding).toMatchObject({ code: 'gap', eventId: id(5, 30) });
      expect(resume(h(), id(3, 15), [ack(id(3, 15, 'zzzzzzzzzz'), 'qrstuvwx', 4)]).finding).toMatchObject({ code: 'fork' });
      // The right id, but another stream in its data.
      expect(resume(h(), id(3, 15), [ack(id(3, 15), 'aaaaaaaa', 4)]).finding).toMatchObject({ code: 'fork' });
    });

    it('on a fresh stream is nothing special: its id is checked like any other', () => {
      const c = new StreamCheck(new StreamHistory());
      expect(c.push(ack(id(1, 10), 'qrstuvwx', 2))).toBeUndefined();
      // Delivered with the acknowledgment's data, the id now names another event.
      expect(c.push(msg(id(1, 10)))).toMatchObject({ code: 'fork', eventId: id(1, 10) });
    });
  });

  it('accepts seq + 1 whatever pos does (other streams interleave)', () => {
    expect(resume(h(), id(3, 15), [msg(id(4, 40)), msg(id(5, 41))]).finding).toBeUndefined();
  });

  it('names a gap by seq, never by pos', () => {
    expect(resume(h(), id(3, 15), [msg(id(6, 16))]).finding).toMatchObject({ code: 'gap', expectedEventId: 'abcdefgh23-qrstuvwx-4-*' });
  });

  it('names another epoch or stream a fork, even when seq looks right', () => {
    expect(resume(h(), id(3, 15), [msg(id(4, 16, 'zzzzzzzzzz'))]).finding).toMatchObject({ code: 'fork' });
    expect(resume(h(), id(3, 15), [msg(id(4, 16, 'abcdefgh23', 'aaaaaaaa'))]).finding).toMatchObject({ code: 'fork' });
  });

  it('tells a replay (same id) from a fork (same seq, other pos)', () => {
    expect(resume(h(), id(3, 15), [msg(id(1, 10))]).finding).toMatchObject({ code: 'replay_from_zero' });
    expect(resume(h(), id(3, 15), [msg(id(1, 99))]).finding).toMatchObject({ code: 'fork', eventId: id(1, 99) });
  });

  it('names a change of id format a fork', () => {
    expect(resume(h(), id(3, 15), [msg('4')]).finding).toMatchObject({ code: 'fork' });
  });
});

describe('StreamCheck on opaque ids', () => {
  const h = () => delivered(['s1_a', 's1_b', 's1_c']);

  it('accepts any new id', () => {
    expect(resume(h(), 's1_c', [msg('s1_d'), msg('s1_e')]).finding).toBeUndefined();
  });

  it('names a repeated id a replay, or a fork when its data changed', () => {
    expect(resume(h(), 's1_c', [msg('s1_a')]).finding).toMatchObject({ code: 'replay_from_zero' });
    expect(resume(h(), 's1_c', [msg('s1_b', '{"x":1}')]).finding).toMatchObject({ code: 'fork' });
  });
});

describe('shapeOf', () => {
  it('reads Tether, numeric and opaque ids', () => {
    expect(shapeOf('abcdefgh23-0-3-77')).toMatchObject({ kind: 'tether', id: { stream: '0', seq: 3, pos: 77 } });
    expect(shapeOf('42')).toEqual({ kind: 'numeric', n: 42 });
    expect(shapeOf('042').kind).toBe('opaque');
    expect(shapeOf('99999999999999999999').kind).toBe('opaque');
    expect(shapeOf('stream_1700000000000_abc').kind).toBe('opaque');
  });
});

describe('StreamHistory', () => {
  it('is bounded, forgetting the oldest ids first', () => {
    const h = new StreamHistory(3);
    for (const id of ['1', '2', '3', '4']) h.record(id, 0);
    expect([...h.ids()]).toEqual(['2', '3', '4']);
    expect(h.lastId).toBe('4');
  });
});
