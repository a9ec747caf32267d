"""hermes-otel: OpenTelemetry tracing for the Hermes Agent.

Hermes loads this package through the ``hermes_agent.plugins`` entry point (or as a directory
plugin) and calls :func:`register`. The rest of the public surface:

* :func:`use_providers` — share a host application's tracer, meter and logger providers;
* :class:`HermesInstrumentor` — the instrumentation of Hermes's middleware runners (contrib style);
* :class:`MiddlewareRunner` — the middleware contract's spec-exact runner, to test middleware
  without an agent (one span per layer, rewrite events).

Everything else is internal and may change between releases.
"""

from .capture.instrumentor import HermesInstrumentor
from .middleware.runner import MiddlewareRunner
from .plugin import register
from .runtime import use_providers
from .version import __version__

__all__ = ["HermesInstrumentor", "MiddlewareRunner", "__version__", "register", "use_providers"]
