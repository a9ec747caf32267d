"""A third-party middleware plugin whose name sorts before `hermes_otel` (Hermes loads plugins alphabetically):
its layers must still be spans inside ours."""


def register(ctx):
    ctx.register_middleware("llm_request", guard_request)
    ctx.register_middleware("llm_execution", guard_llm)
    ctx.register_middleware("tool_execution", guard_tool)


def guard_request(**kwargs):
    request = dict(kwargs["request"])
    request["user"] = "acme"
    return {"request": request, "source": "acme_guard", "reason": "tagged the caller"}


def guard_llm(**kwargs):
    return kwargs["next_call"](kwargs["request"])


def guard_tool(**kwargs):
    return kwargs["next_call"](kwargs["args"])
