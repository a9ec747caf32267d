"""A small third-party middleware plugin that `hermes-otel demo` installs next to hermes_otel.

It does what real middleware does, so the demo's trace shows it: one request rewrite (`llm_request`:
pins the temperature, recorded as a `hermes.middleware.rewrite` event on each `chat` span) and one
execution layer (`tool_execution`: times the tool call, a `tool_execution demo_middleware` span inside
each `execute_tool`). On a Hermes without middleware (0.16.0) it registers nothing.
"""

import logging
import time

_log = logging.getLogger(__name__)


def register(ctx):
    if not callable(getattr(ctx, "register_middleware", None)):
        return
    ctx.register_middleware("llm_request", pin_temperature)
    ctx.register_middleware("tool_execution", time_tool)


def pin_temperature(**kwargs):
    request = dict(kwargs["request"])  # a full replacement, never a patch
    request["temperature"] = 0.0
    return {"request": request, "source": "demo_middleware", "reason": "pinned temperature for reproducible runs"}


def time_tool(**kwargs):
    started = time.perf_counter()
    try:
        return kwargs["next_call"](kwargs["args"])
    finally:
        _log.debug("%s took %.1f ms", kwargs.get("tool_name"), (time.perf_counter() - started) * 1000)
