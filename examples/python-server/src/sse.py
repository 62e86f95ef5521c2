"""SSE framing, a chunked response body, and a watcher that notices a client
going away (which http.server, unlike node:http, never reports)."""

from __future__ import annotations

import re
import selectors
import socket
import threading
from typing import BinaryIO, Callable

_LINE_BREAK = re.compile(r'\r\n|\r|\n')


def sse_event(event_id: str, data: str, retry_ms: int | None = None) -> bytes:
    """One SSE event (WHATWG HTML, "Server-sent events", event stream format):
    an `id:` line, an optional `retry:` line, then one `data:` line per line
    of the payload, and a blank line. An empty payload still gets one empty
    `data:` line, which is how a priming event looks (SEP-1699)."""
    lines = [f'id: {event_id}']
    if retry_ms is not None:
        lines.append(f'retry: {retry_ms}')
    lines.extend(f'data: {line}' for line in _LINE_BREAK.split(data))
    return ('\n'.join(lines) + '\n\n').encode('utf-8')


class ChunkedBody:
    """An HTTP/1.1 chunked response body. Chunked rather than "until the
    connection closes": the last chunk tells a complete stream from a cut one,
    for the client and for any proxy in between."""

    def __init__(self, wfile: BinaryIO) -> None:
        self._wfile = wfile
        self.open = True

    def write(self, data: bytes) -> bool:
        """Writes one chunk; False once the client is gone (never raises: the log has the event)."""
        if not self.open or not data:
            return self.open
        try:
            self._wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
            self._wfile.flush()
        except OSError:
            self.open = False
        return self.open

    def end(self) -> None:
        if self.open:
            try:
                self._wfile.write(b'0\r\n\r\n')
                self._wfile.flush()
            except OSError:
                pass
            self.open = False


def watch_client(sock: socket.socket, on_gone: Callable[[], None]) -> Callable[[], None]:
    """Calls `on_gone` (once, from another thread) when the client closes or
    resets its connection; returns a function that stops watching.

    While a handler thread waits on the log (a Resume following live), it
    writes nothing, so a failed write cannot tell it the client left; and a
    client sends nothing after a GET's headers. So a readable socket with
    nothing to read means end of file. Bytes instead (a pipelined request)
    end the watch: that client is still there."""
    selector = selectors.DefaultSelector()
    stop_r, stop_w = socket.socketpair()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(stop_r, selectors.EVENT_READ)

    def run() -> None:
        try:
            for key, _ in selector.select():
                if key.fileobj is stop_r:
                    return
            try:
                gone = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b''
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if gone:
                on_gone()
        finally:
            selector.close()
            stop_r.close()

    watcher = threading.Thread(target=run, name='client-watch', daemon=True)
    watcher.start()

    def stop() -> None:
        try:
            stop_w.send(b'x')
        except OSError:
            pass
        watcher.join()
        stop_w.close()

    return stop
