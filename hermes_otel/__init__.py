"""hermes-otel: OpenTelemetry tracing for the Hermes Agent.

Hermes loads this package through the ``hermes_agent.plugins`` entry point
(or as a directory plugin) and calls :func:`register`.
"""

from .version import __version__
from .plugin import register

__all__ = ["__version__", "register"]
