"""Records every observer hook call (name and ids), in order, for the log-stream tests."""

import threading

TAPE = []
_lock = threading.Lock()


def register(ctx):
    from hermes_cli.plugins import VALID_HOOKS

    for name in sorted(VALID_HOOKS):
        ctx.register_hook(name, _recorder(name))


def _recorder(name):
    def record(**kwargs):
        with _lock:
            TAPE.append((name, kwargs.get("turn_id"), kwargs.get("tool_call_id")))

    return record
