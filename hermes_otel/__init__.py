"""hermes-otel: OpenTelemetry tracing for the Hermes Agent.

Hermes loads this package through the ``hermes_agent.plugins`` entry point (or as a directory
plugin) and calls :func:`register`. The rest of the public surface:

* :func:`use_providers` — share a host application's tracer, meter and logger providers;
* :class:`HermesInstrumentor` — the instrumentation of Hermes's middleware runners (contrib style);
* :class:`MiddlewareRunner` — the middleware contract's spec-exact runner, to test middleware
  without an agent (one span per layer, rewrite events).

Everything else is internal and may change between releases.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .capture.instrumentor import HermesInstrumentor
    from .middleware.runner import MiddlewareRunner
    from .plugin import register
    from .runtime import use_providers

__all__ = ["HermesInstrumentor", "MiddlewareRunner", "__version__", "register", "use_providers"]

# Imported on first use (PEP 562): loading the plugin needs `register` only, and every run pays for what is imported.
_LAZY = {"HermesInstrumentor": ".capture.instrumentor", "MiddlewareRunner": ".middleware.runner",
         "register": ".plugin", "use_providers": ".runtime"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value
