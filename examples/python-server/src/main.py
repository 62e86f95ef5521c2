#!/usr/bin/python3
"""`/usr/bin/python3 examples/python-server/src/main.py --port 3000 --log 127.0.0.1:50051 --token <t>`
(or PORT, TETHER_LOG_TARGET, TETHER_LOG_TOKEN). Prints one JSON line
`{"msg":"listening","port":…}` when ready; SIGTERM stops it.

The stubs come from `--gen` (default: examples/python-server/gen, which
`generate.sh` writes)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    parser = argparse.ArgumentParser(prog='tether-python-server', description='An MCP server on the Tether cursor API.')
    parser.add_argument('--port', type=int, default=int(os.environ.get('PORT', '0')))
    parser.add_argument('--log', default=os.environ.get('TETHER_LOG_TARGET', '127.0.0.1:50051'), help='host:port of tether-session-log')
    parser.add_argument('--token', default=os.environ.get('TETHER_LOG_TOKEN'), help='its bearer token')
    parser.add_argument('--instance', default=f'python-{os.urandom(3).hex()}', help='this instance\'s name (logs, session metadata)')
    parser.add_argument('--gen', default=os.path.join(HERE, '..', 'gen'), help='the generated stubs (generate.sh OUT)')
    args = parser.parse_args()

    # The generated modules import each other as `tether.cursor.v1…` and
    # `google.rpc…`: their root goes on the path (after Debian's google.protobuf).
    sys.path.append(os.path.abspath(args.gen))
    try:
        from server import McpServer
        from cursor_log import EventLog
    except ImportError as err:
        sys.exit(f'tether-python-server: {err}: run `bash examples/python-server/generate.sh` first, '
                 'with Debian\'s python3-grpcio and python3-protobuf installed, and run /usr/bin/python3')

    log = EventLog(args.log, args.token)
    server = McpServer(args.port, log, args.instance)

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = server.server_address[1]
    print(json.dumps({'msg': 'listening', 'port': port, 'url': f'http://127.0.0.1:{port}/mcp', 'instance': args.instance}), flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        log.close()


if __name__ == '__main__':
    main()
