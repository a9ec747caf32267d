"""A second third-party middleware plugin for the tests: misbehaves in every documented way."""

import os

CANNED = "short-circuited by mw_beta"


def register(ctx):
    ctx.register_middleware("llm_request", anonymous_rewrite)
    ctx.register_middleware("llm_execution", broken_layer)
    ctx.register_middleware("tool_request", broken_request)
    ctx.register_middleware("tool_execution", maybe_short_circuit)


def anonymous_rewrite(**kwargs):
    request = dict(kwargs["request"])
    request["top_p"] = 0.5
    return {"request": request}  # no source/reason: Hermes records source="plugin"


def broken_layer(**kwargs):
    raise RuntimeError("mw_beta layer is broken")  # before next_call: fail-open


def broken_request(**kwargs):
    raise ValueError("mw_beta cannot read args")


def maybe_short_circuit(**kwargs):
    if os.environ.get("MW_BETA_SHORT_CIRCUIT") == "1":
        return CANNED
    return kwargs["next_call"](kwargs["args"])
