"""Everything this server asks of Tether: calls of the stubs generated from
proto/tether/cursor/v1/cursor.proto, and nothing else (no NATS, no Tether
library). The same calls, in the same order, as examples/custom-server's
src/log.ts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator

import grpc
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from tether.cursor.v1 import cursor_pb2 as pb
from tether.cursor.v1 import cursor_pb2_grpc

#: The trailer that carries a `google.rpc.Status` with our ErrorDetail (the
#: gRPC richer error model). grpcio reads it only through the grpcio-status
#: package, which Debian does not ship, so `read_call_failure` decodes it.
STATUS_DETAILS_KEY = 'grpc-status-details-bin'
#: Unary calls get this deadline (seconds); Resume has none: it follows live.
DEADLINE_S = 5.0
#: An Append that ended so may have been stored: retry it with the same `expected_seq`.
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
APPEND_ATTEMPTS = 3


@dataclass(frozen=True)
class CallFailure:
    """A failed call as the service reports it: status, message, and our ErrorDetail when it sent one."""

    code: grpc.StatusCode
    message: str
    detail: pb.ErrorDetail | None


def read_call_failure(err: grpc.RpcError) -> CallFailure:
    """Reads a failed call's status and the ErrorDetail in its
    `grpc-status-details-bin` trailer. Never raises: a missing or malformed
    trailer gives `detail=None`."""
    code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
    message = err.details() if isinstance(err, grpc.Call) else str(err)
    trailers = err.trailing_metadata() if isinstance(err, grpc.Call) else None
    detail = None
    for key, value in trailers or ():
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
            for any_detail in status.details:
                if any_detail.Is(pb.ErrorDetail.DESCRIPTOR):
                    detail = pb.ErrorDetail()
                    any_detail.Unpack(detail)
                    break
        except DecodeError:
            detail = None
    return CallFailure(code, message or '', detail)


def verdict_spelling(verdict: int) -> str:
    """`RESUME_VERDICT_EPOCH_MISMATCH` → `epoch_mismatch`, the `Tether-Resume`
    spelling (a proto3 enum is a plain int in Python: an unknown value has no
    name)."""
    try:
        name = pb.ResumeVerdict.Name(verdict)
    except ValueError:
        return 'unknown'
    return 'unknown' if verdict == pb.RESUME_VERDICT_UNSPECIFIED else name.removeprefix('RESUME_VERDICT_').lower()


@dataclass(frozen=True)
class Refused:
    """A refused resume: the verdict, spelled as `Tether-Resume` spells it."""

    verdict: str


class ResumeCall:
    """One Resume call: its ack (or refusal), then its events. `cancel()` may
    be called from any thread, at any time: it ends the call on the service
    too, which stops reading the log at once."""

    def __init__(self, call: grpc.Call) -> None:
        self._call = call
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def ack(self) -> pb.ResumeAck | Refused:
        """The first message. A refusal is a status with code `resume_refused`
        (never a message); any other failure raises `grpc.RpcError`."""
        try:
            first = next(self._call)
        except grpc.RpcError as err:
            failure = read_call_failure(err)
            if failure.detail is not None and failure.detail.code == 'resume_refused':
                return Refused(verdict_spelling(failure.detail.verdict))
            raise
        except StopIteration:
            raise RuntimeError('the resume ended without an ack') from None
        if first.WhichOneof('message') != 'ack':
            self.cancel()
            raise RuntimeError('the resume started without an ack')
        return first.ack

    def events(self) -> Iterator[pb.Event]:
        """Every event after the cursor, replayed then live, through the
        stream's `end` event. Ends quietly when cancelled. The iterator pulls
        one message at a time, so a slow client slows the service's reads
        (gRPC flow control) instead of filling memory."""
        try:
            for message in self._call:
                if message.WhichOneof('message') == 'event':
                    yield message.event
        except grpc.RpcError as err:
            if self._cancelled and err.code() == grpc.StatusCode.CANCELLED:
                return
            raise


class EventLog:
    """The cursor API over one channel. Thread-safe: every HTTP handler
    thread calls it."""

    def __init__(self, target: str, token: str | None) -> None:
        self._channel = grpc.insecure_channel(target)
        self._stub = cursor_pb2_grpc.CursorServiceStub(self._channel)
        # Per-call metadata rather than call credentials: grpcio sends those
        # only over TLS channels.
        self._metadata = (('authorization', f'Bearer {token}'),) if token else ()

    def open_session(self, principal: str, meta: dict[str, str]) -> pb.Session:
        request = pb.OpenSessionRequest(principal=principal, meta=meta)
        return self._stub.OpenSession(request, timeout=DEADLINE_S, metadata=self._metadata).session

    def find_session(self, session_id: str, principal: str) -> pb.Session | None:
        """The session if it exists and is this principal's, else None (NOT_FOUND, or a malformed id)."""
        try:
            request = pb.GetSessionRequest(session_id=session_id, principal=principal)
            return self._stub.GetSession(request, timeout=DEADLINE_S, metadata=self._metadata).session
        except grpc.RpcError as err:
            detail = read_call_failure(err).detail
            if detail is not None and detail.code in ('session_not_found', 'session_closed', 'invalid_argument'):
                return None
            raise

    def close_session(self, session_id: str, closed_by: str) -> bool:
        # `from` is a Python keyword: the field can only be set by name through **kwargs (or setattr).
        request = pb.CloseSessionRequest(session_id=session_id, **{'from': closed_by})
        return self._stub.CloseSession(request, timeout=DEADLINE_S, metadata=self._metadata).closed

    def append(self, session_id: str, stream: str, kind: int, payload: bytes, expected_seq: int) -> pb.AppendResponse:
        """Appends one event as seq `expected_seq` of its stream; returns once
        it is durable. A call that ended with an unknown outcome is retried
        with the same `expected_seq`: if the first one was stored, the retry
        answers it (`duplicate`), so the event is never stored twice."""
        request = pb.AppendRequest(session_id=session_id, stream=stream, kind=kind, payload=payload, expected_seq=expected_seq)
        for attempt in range(1, APPEND_ATTEMPTS + 1):
            try:
                return self._stub.Append(request, timeout=DEADLINE_S, metadata=self._metadata)
            except grpc.RpcError as err:
                if attempt == APPEND_ATTEMPTS or read_call_failure(err).code not in RETRYABLE:
                    raise
                time.sleep(0.1 * attempt)
        raise AssertionError('unreachable')

    def resume(self, session_id: str, last_event_id: str, principal: str) -> ResumeCall:
        """Starts a Resume of a client's `Last-Event-ID` (verbatim)."""
        request = pb.ResumeRequest(session_id=session_id, last_event_id=last_event_id, principal=principal)
        return ResumeCall(self._stub.Resume(request, metadata=self._metadata))

    def close(self) -> None:
        self._channel.close()
