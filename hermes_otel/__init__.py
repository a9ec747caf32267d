"""hermes-otel: OpenTelemetry tracing for the Hermes Agent.

Hermes loads this package through the ``hermes_agent.plugins`` entry point
(or as a directory plugin) and calls :func:`register`.
"""

from .plugin import register
from .version import __version__

__all__ = ["__version__", "register"]
