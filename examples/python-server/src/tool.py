"""The one tool this server offers: `countdown` streams a progress
notification every `intervalMs`, `count` times, then its result. Slow on
purpose, so a connection can be cut while it runs. Same as
examples/custom-server's src/tool.ts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

COUNTDOWN_TOOL = {
    'name': 'countdown',
    'description': 'Counts to `count`, one progress notification every `intervalMs`, then answers.',
    'inputSchema': {
        'type': 'object',
        'properties': {
            'count': {'type': 'integer', 'minimum': 1, 'maximum': 10_000},
            'intervalMs': {'type': 'integer', 'minimum': 0, 'maximum': 60_000},
        },
        'required': ['count'],
    },
}


@dataclass(frozen=True)
class CountdownArgs:
    count: int
    interval_ms: int


def _is_int(value: Any) -> bool:
    # bool is an int in Python; JSON true is not a count.
    return isinstance(value, int) and not isinstance(value, bool)


def countdown_args(args: Any) -> CountdownArgs | str:
    """Validated arguments, or a message saying what is wrong."""
    a = args if isinstance(args, dict) else {}
    count = a.get('count')
    interval_ms = a.get('intervalMs', 100)
    if not _is_int(count) or not 1 <= count <= 10_000:
        return 'count must be an integer from 1 to 10000'
    if not _is_int(interval_ms) or not 0 <= interval_ms <= 60_000:
        return 'intervalMs must be an integer from 0 to 60000'
    return CountdownArgs(count, interval_ms)


def countdown(request_id: str | int, progress_token: str | int | None, args: CountdownArgs) -> Iterator[dict]:
    """The messages of one run, in order: `count` progress notifications (when
    the caller asked for progress), then the JSON-RPC result for `request_id`."""
    for i in range(1, args.count + 1):
        time.sleep(args.interval_ms / 1000)
        if progress_token is not None:
            params = {'progressToken': progress_token, 'progress': i, 'total': args.count, 'message': f'{i} of {args.count}'}
            yield {'jsonrpc': '2.0', 'method': 'notifications/progress', 'params': params}
    yield {'jsonrpc': '2.0', 'id': request_id, 'result': {'content': [{'type': 'text', 'text': f'counted to {args.count}'}]}}
