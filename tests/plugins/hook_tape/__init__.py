"""Records every observer hook call (name and ids), in order, for the log-stream tests."""

import threading
import time

TAPE = []
TIMES = []  # (hook, wall-clock ns when Hermes called it), in TAPE's order
_lock = threading.Lock()


def register(ctx):
    from hermes_cli.plugins import VALID_HOOKS

    for name in sorted(VALID_HOOKS):
        ctx.register_hook(name, _recorder(name))


def _recorder(name):
    def record(**kwargs):
        now = time.time_ns()
        with _lock:
            TAPE.append((name, kwargs.get("turn_id"), kwargs.get("tool_call_id")))
            TIMES.append((name, now))

    return record
