"""An MCP server that speaks Streamable HTTP itself, on the standard
library's http.server (no web framework, no MCP SDK), and keeps every SSE
event in Tether's log through the gRPC cursor API: each event is appended,
and so durable, before the client sees it, and a client that comes back
with `Last-Event-ID` is served from the log by whichever instance it
reaches. examples/custom-server's src/server.ts, in Python."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import urlsplit

import grpc
from tether.cursor.v1 import cursor_pb2 as pb

from cursor_log import EventLog, Refused, read_call_failure
from sse import ChunkedBody, sse_event, watch_client
from tool import COUNTDOWN_TOOL, countdown, countdown_args

SUPPORTED_VERSIONS = ('2025-11-25', '2025-06-18', '2025-03-26')
#: Sent as the SSE `retry:` hint: how soon a cut client should come back.
RETRY_MS = 200
MAX_BODY_BYTES = 1024 * 1024
BASE32 = 'abcdefghijklmnopqrstuvwxyz234567'
#: DNS rebinding protection (spec, "Security Warning"): only loopback origins here.
LOOPBACK_ORIGIN = re.compile(r'^https?://(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$')


def new_stream_id() -> str:
    """A POST response stream's id: 8 lowercase base32 characters (cursor.proto, IDS AND NUMBERS)."""
    return ''.join(BASE32[b & 31] for b in os.urandom(8))


def principal_of(authorization: str | None) -> str:
    """The end user, as cursor.proto asks: a digest of their credential, never
    the credential. No credential: the empty principal that anonymous users share."""
    return hashlib.sha256(authorization.encode('utf-8')).hexdigest() if authorization else ''


def rpc_error(request_id: Any, code: int, message: str) -> dict:
    return {'jsonrpc': '2.0', 'id': request_id, 'error': {'code': code, 'message': message}}


class McpServer(ThreadingHTTPServer):
    """One thread per connection (daemon threads: a stop does not wait for streams)."""

    daemon_threads = True

    def __init__(self, port: int, log: EventLog, instance: str) -> None:
        super().__init__(('127.0.0.1', port), Handler)
        self.log = log
        self.instance = instance


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    # Idle keep-alive connections, and writes to a client that stopped reading, give up after this.
    timeout = 60
    server: McpServer

    # --- plumbing --------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.responded = False

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f'{self.server.instance}: {format % args}\n')

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, separators=(',', ':')).encode('utf-8')
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.responded = True
        self.wfile.write(data)

    def send_empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header('Content-Length', '0')
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.responded = True

    def start_sse(self, headers: dict[str, str]) -> ChunkedBody:
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream')
        self.send_header('Cache-Control', 'no-cache, no-transform')
        self.send_header('Transfer-Encoding', 'chunked')
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.responded = True
        return ChunkedBody(self.wfile)

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return value if value else None

    def guarded(self, handler: Callable[[str, str | None], None]) -> None:
        try:
            if urlsplit(self.path).path != '/mcp':
                return self.send_json(404, {'error': 'not found'})
            origin = self.header('Origin')
            if origin is not None and not LOOPBACK_ORIGIN.match(origin):
                return self.send_json(403, {'error': 'origin not allowed'})
            handler(principal_of(self.header('Authorization')), self.header('Mcp-Session-Id'))
        except Exception as err:  # the edge: one request fails, the server goes on
            sys.stderr.write(f'{self.server.instance}: {self.command} failed: {err!r}\n')
            if not self.responded:
                self.send_json(500, {'error': 'internal error'})
            # Mid-stream: no last chunk, so the client sees a broken stream and resumes.
            self.close_connection = True

    # http.server dispatches on these names.
    def do_POST(self) -> None:
        self.guarded(self.post)

    def do_GET(self) -> None:
        self.guarded(self.get)

    def do_DELETE(self) -> None:
        self.guarded(self.delete)

    # --- MCP -------------------------------------------------------------

    def read_message(self) -> dict | None:
        if 'chunked' in (self.header('Transfer-Encoding') or '').lower():
            self.close_connection = True
            return None
        length_header = self.header('Content-Length') or '0'
        if not length_header.isdigit() or int(length_header) > MAX_BODY_BYTES:
            self.close_connection = True  # a body we will not read: the connection cannot be reused
            return None
        length = int(length_header)
        try:
            msg = json.loads(self.rfile.read(length))
        except ValueError:
            return None
        return msg if isinstance(msg, dict) and msg.get('jsonrpc') == '2.0' else None

    def post(self, principal: str, session_id: str | None) -> None:
        log = self.server.log
        msg = self.read_message()
        if msg is None:
            return self.send_json(400, rpc_error(None, -32700, 'expected one JSON-RPC message'))
        request_id, method = msg.get('id'), msg.get('method')
        params = msg.get('params') if isinstance(msg.get('params'), dict) else {}
        if method == 'initialize':
            if session_id is not None:
                return self.send_json(400, rpc_error(request_id, -32600, 'initialize must not carry a session'))
            asked = params.get('protocolVersion')
            version = asked if asked in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0]
            session = log.open_session(principal, {'protocolVersion': version, 'openedBy': self.server.instance})
            result = {'protocolVersion': version, 'capabilities': {'tools': {}}, 'serverInfo': {'name': 'tether-python-server', 'version': '0.1.0'}}
            return self.send_json(200, {'jsonrpc': '2.0', 'id': request_id, 'result': result}, {'Mcp-Session-Id': session.session_id})
        if session_id is None:
            return self.send_json(400, rpc_error(request_id, -32600, 'Mcp-Session-Id is required'))
        if log.find_session(session_id, principal) is None:
            return self.send_json(404, rpc_error(request_id, -32001, 'session not found'))
        headers = {'Mcp-Session-Id': session_id}
        if request_id is None or not isinstance(method, str):
            return self.send_empty(202, headers)  # a notification or a response: accepted, nothing to answer
        if method == 'ping':
            return self.send_json(200, {'jsonrpc': '2.0', 'id': request_id, 'result': {}}, headers)
        if method == 'tools/list':
            return self.send_json(200, {'jsonrpc': '2.0', 'id': request_id, 'result': {'tools': [COUNTDOWN_TOOL]}}, headers)
        if method != 'tools/call':
            return self.send_json(200, rpc_error(request_id, -32601, f'unknown method {method}'), headers)
        args = countdown_args(params.get('arguments'))
        if params.get('name') != COUNTDOWN_TOOL['name'] or isinstance(args, str):
            return self.send_json(200, rpc_error(request_id, -32602, args if isinstance(args, str) else 'unknown tool'), headers)
        meta = params.get('_meta') if isinstance(params.get('_meta'), dict) else {}
        progress_token = meta.get('progressToken')

        # A new response stream: every event is appended before it is written,
        # and the run goes on if the client goes away, so that a resume on any
        # instance finds all of it in the log. `expected_seq` is the append's
        # idempotency key: 1 for the PRIME event, then one more each time.
        stream = new_stream_id()
        body = self.start_sse(headers)
        prime = log.append(session_id, stream, pb.EVENT_KIND_PRIME, b'', 1)
        body.write(sse_event(prime.id, '', RETRY_MS))
        seq = prime.seq
        for message in countdown(request_id, progress_token, args):
            data = json.dumps(message, separators=(',', ':'))
            appended = log.append(session_id, stream, pb.EVENT_KIND_EVENT, data.encode('utf-8'), seq + 1)
            seq = appended.seq
            body.write(sse_event(appended.id, data))
        log.append(session_id, stream, pb.EVENT_KIND_END, b'', seq + 1)
        body.end()
        self.close_connection = self.close_connection or not body.open

    def get(self, principal: str, session_id: str | None) -> None:
        log = self.server.log
        last_event_id = self.header('Last-Event-ID')
        # This server sends nothing unprompted, so it offers no standalone GET stream.
        if last_event_id is None:
            return self.send_empty(405, {'Allow': 'POST, DELETE'})
        if session_id is None:
            return self.send_json(400, {'error': 'Mcp-Session-Id is required'})
        resume = log.resume(session_id, last_event_id, principal)
        # When the client goes away, cancel the call: the service stops
        # reading the log for it at once, even while it waits for live events.
        stop_watching = watch_client(self.connection, resume.cancel)
        try:
            try:
                ack = resume.ack()
            except grpc.RpcError as err:
                if resume.cancelled:
                    self.close_connection = True
                    return None
                detail = read_call_failure(err).detail
                if detail is not None and detail.code == 'too_many_streams':
                    return self.send_json(503, {'error': 'too many resumes open'}, {'Retry-After': '1'})
                raise
            if isinstance(ack, Refused):
                # DESIGN section 7: malformed is the client's mistake; any other
                # refusal of a session that is the caller's ends it, and 404 makes
                # a spec-compliant client start a new one.
                if ack.verdict not in ('malformed', 'unknown_session'):
                    try:
                        log.close_session(session_id, self.server.instance)
                    except grpc.RpcError:
                        pass
                status = 400 if ack.verdict == 'malformed' else 404
                return self.send_json(status, {'error': 'resume refused', 'verdict': ack.verdict}, {'Tether-Resume': ack.verdict})
            if ack.ended_at_cursor or ack.nothing_left:
                return self.send_empty(204, {'Tether-Resume': 'resumed'})
            body = self.start_sse({'Mcp-Session-Id': session_id, 'Tether-Resume': 'resumed'})
            for event in resume.events():
                if event.kind == pb.EVENT_KIND_END:
                    break
                if not body.write(sse_event(event.id, event.payload.decode('utf-8'))):
                    break
            if resume.cancelled or not body.open:
                self.close_connection = True  # the client left: no last chunk to send
            else:
                body.end()
        finally:
            stop_watching()
            resume.cancel()

    def delete(self, principal: str, session_id: str | None) -> None:
        log = self.server.log
        if session_id is None or log.find_session(session_id, principal) is None:
            return self.send_json(404, {'error': 'unknown session'})
        log.close_session(session_id, self.server.instance)
        self.send_empty(200)
