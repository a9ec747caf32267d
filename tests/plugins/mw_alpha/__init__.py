"""A third-party middleware plugin for the tests: rewrites requests, times execution."""

import time

TIMINGS = []


def register(ctx):
    ctx.register_middleware("llm_request", tag_request)
    ctx.register_middleware("llm_execution", time_llm)
    ctx.register_middleware("tool_request", default_timeout)
    ctx.register_middleware("tool_execution", time_tool)


def tag_request(**kwargs):
    request = dict(kwargs["request"])
    request["seed"] = 1234
    return {"request": request, "source": "alpha", "reason": "pinned seed"}


def time_llm(**kwargs):
    started = time.perf_counter()
    response = kwargs["next_call"](kwargs["request"])
    TIMINGS.append(("llm", time.perf_counter() - started))
    return response


def default_timeout(**kwargs):
    if kwargs.get("tool_name") not in ("terminal", "read_file"):
        return None
    args = dict(kwargs["args"])
    args.setdefault("timeout", 42)
    return {"args": args, "source": "alpha", "reason": "default timeout", "name": "timeout-default"}


def time_tool(**kwargs):
    started = time.perf_counter()
    result = kwargs["next_call"](kwargs["args"])
    TIMINGS.append(("tool", time.perf_counter() - started))
    return result


# What Hermes handed to observers as middleware_trace, per call, for comparison with our events.
TRACES = []


def _record_llm_trace(**kwargs):
    TRACES.append(("llm_request", kwargs.get("api_request_id"), list(kwargs.get("middleware_trace") or [])))


def _record_tool_trace(**kwargs):
    TRACES.append(("tool_request", kwargs.get("tool_call_id"), list(kwargs.get("middleware_trace") or [])))


_register_middleware = register


def register(ctx):  # noqa: F811 - extends the registration above with observer hooks
    _register_middleware(ctx)
    ctx.register_hook("pre_api_request", _record_llm_trace)
    ctx.register_hook("pre_tool_call", _record_tool_trace)
