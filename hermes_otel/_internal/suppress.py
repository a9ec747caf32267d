"""What `opentelemetry.instrumentation.utils` gives contrib instrumentations, without that package.

The suppression keys are the API's own (the SDK's exporters set them too), so a host's
`suppress_instrumentation()` context silences us as it silences every contrib instrumentation.
`opentelemetry-instrumentation` stays out of the runtime dependencies: its semantic-conventions pin
does not fit Hermes 0.2x's OpenTelemetry pins.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context

_SUPPRESS = getattr(context, "_SUPPRESS_INSTRUMENTATION_KEY", None)
_SUPPRESS_HTTP = getattr(context, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None)


def is_instrumentation_enabled() -> bool:
    return _SUPPRESS is None or not context.get_value(_SUPPRESS)


def is_http_instrumentation_enabled() -> bool:
    return is_instrumentation_enabled() and (_SUPPRESS_HTTP is None or not context.get_value(_SUPPRESS_HTTP))


def unwrap(owner: Any, name: str) -> None:
    """Put back what a wrapt wrapper at `owner.name` wraps (nothing when it is not wrapped)."""
    attribute = getattr(owner, name, None)
    original = getattr(attribute, "__wrapped__", None)
    if original is not None:
        setattr(owner, name, original)
