"""A third-party middleware plugin that declares `requires_plugins` (Hermes loads it after zz_audit, so after
hermes_otel, although its name sorts before both)."""


def register(ctx):
    ctx.register_middleware("llm_execution", beacon_llm)
    ctx.register_middleware("tool_execution", beacon_tool)


def beacon_llm(**kwargs):
    return kwargs["next_call"](kwargs["request"])


def beacon_tool(**kwargs):
    return kwargs["next_call"](kwargs["args"])
