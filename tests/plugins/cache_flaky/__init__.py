"""A third-party middleware plugin whose name sorts before `hermes_otel`, with a layer that fails before it calls
`next_call` (Hermes skips it: fail-open)."""


def register(ctx):
    ctx.register_middleware("llm_execution", cached_llm)
    ctx.register_middleware("tool_execution", cached_tool)


def cached_llm(**kwargs):
    raise KeyError("cache_flaky has no cache")


def cached_tool(**kwargs):
    return kwargs["next_call"](kwargs["args"])
