import { describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { readCallFailure, ResumeVerdict } from '@tether/cursor-proto';
import { SessionLogError, SessionLogErrorCode } from '@tether/session-log';
import type { Refusal } from '@tether/session-log';
import { CursorServiceError, refusalStatus, ServiceErrorCode, toGrpcStatus } from '@tether/session-log-service';

describe('status mapping (the table in cursor.proto)', () => {
  it('maps every library code and every service code, keeping the code and fields in the details', () => {
    const expected: Record<string, number> = {
      invalid_config: status.INTERNAL,
      incompatible_log: status.INTERNAL,
      unsupported_server: status.INTERNAL,
      invalid_argument: status.INVALID_ARGUMENT,
      session_not_found: status.NOT_FOUND,
      session_closed: status.NOT_FOUND,
      payload_too_large: status.RESOURCE_EXHAUSTED,
      writer_conflict: status.ABORTED,
      stream_ended: status.FAILED_PRECONDITION,
      lease_held: status.FAILED_PRECONDITION,
      lease_lost: status.ABORTED,
      stream_truncated: status.OUT_OF_RANGE,
      stream_diverged: status.DATA_LOSS,
      log_unavailable: status.UNAVAILABLE,
      unauthenticated: status.UNAUTHENTICATED,
      too_many_streams: status.RESOURCE_EXHAUSTED,
      too_many_sessions: status.RESOURCE_EXHAUSTED,
      skipped: status.ABORTED,
      internal: status.INTERNAL,
      // The operator API's (operator.proto): answered by the interceptor when no --operator-token is set.
      operator_api_off: status.PERMISSION_DENIED,
    };
    const codes = [...Object.values(SessionLogErrorCode), ...Object.values(ServiceErrorCode).filter((c) => c !== 'resume_refused')];
    for (const code of codes) {
      const err = (Object.values(SessionLogErrorCode) as string[]).includes(code)
        ? new SessionLogError(code as SessionLogErrorCode, `m-${code}`, { sessionId: 's', stream: '0', seq: 3, expectedSeq: 4, holder: 'gw', detail: { expiresAtMs: 99, bytes: 5 } })
        : new CursorServiceError(code as ServiceErrorCode, `m-${code}`);
      const mapped = toGrpcStatus(err);
      expect([code, mapped.code]).toEqual([code, expected[code]]);
      const read = readCallFailure({ code: mapped.code, details: mapped.details, metadata: mapped.metadata });
      expect(read.detail?.code).toBe(code);
      if (err instanceof SessionLogError) {
        expect(read.detail).toMatchObject({ sessionId: 's', stream: '0', seq: 3, expectedSeq: 4, holder: 'gw', holderExpiresAtMs: 99, facts: { bytes: '5' } });
      }
    }
  });

  it('withholds the message of unexpected errors', () => {
    const mapped = toGrpcStatus(new TypeError('secret internals'));
    expect([mapped.code, mapped.details]).toEqual([status.INTERNAL, 'internal error']);
  });

  it('maps every refusal verdict, with the cursor and positions', () => {
    const expected: Record<Refusal['verdict'], [number, number]> = {
      malformed: [status.INVALID_ARGUMENT, ResumeVerdict.MALFORMED],
      unknown_session: [status.NOT_FOUND, ResumeVerdict.UNKNOWN_SESSION],
      epoch_mismatch: [status.FAILED_PRECONDITION, ResumeVerdict.EPOCH_MISMATCH],
      diverged: [status.FAILED_PRECONDITION, ResumeVerdict.DIVERGED],
      abandoned: [status.FAILED_PRECONDITION, ResumeVerdict.ABANDONED],
      ahead: [status.OUT_OF_RANGE, ResumeVerdict.AHEAD],
      truncated: [status.OUT_OF_RANGE, ResumeVerdict.TRUNCATED],
    };
    for (const [verdict, [code, protoVerdict]] of Object.entries(expected)) {
      const refusal: Refusal = { verdict: verdict as Refusal['verdict'], reason: 'r', sessionId: 's', cursor: { epoch: 'abcdefghij', stream: '0', seq: 2, pos: 7 }, log: { lastSeq: 9 } };
      const mapped = refusalStatus(refusal);
      const read = readCallFailure({ code: mapped.code, details: mapped.details, metadata: mapped.metadata });
      expect([verdict, read.code, read.detail?.verdict]).toEqual([verdict, code, protoVerdict]);
      expect(read.detail).toMatchObject({ code: 'resume_refused', cursor: 'abcdefghij-0-2-7', stream: '0', log: { lastSeq: 9 } });
    }
  });
});
