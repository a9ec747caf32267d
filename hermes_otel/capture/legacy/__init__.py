"""What Hermes 0.16-0.19 needs beyond the public plugin surfaces: rebinding some of its internals (wrapt around the
middleware runners and the auxiliary client, the provider thread's `threading`, the stream diagnostics; the
pricing fetchers on our pricing thread are hermes_compat/internals.py's). Hermes 0.20+ copies context into its
provider threads, reads its chain's callbacks itself, fires auxiliary and stream hooks and prices without the
network on our behalf, so none of this is loaded there: :func:`load` imports a module of this package only when a
feature probe (hermes_compat/) says the running Hermes needs it. Nothing else of hermes-otel imports it.
"""

from __future__ import annotations

import importlib
import types


def load(name: str) -> types.ModuleType:
    """`patches`, `auxiliary` or `stream_diag` of this package, imported on first use."""
    return importlib.import_module(f"{__name__}.{name}")
