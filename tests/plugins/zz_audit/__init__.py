"""A third-party middleware plugin whose name sorts after `hermes_otel`."""


def register(ctx):
    ctx.register_middleware("llm_execution", audit_llm)
    ctx.register_middleware("tool_execution", audit_tool)


def audit_llm(**kwargs):
    return kwargs["next_call"](kwargs["request"])


def audit_tool(**kwargs):
    return kwargs["next_call"](kwargs["args"])
