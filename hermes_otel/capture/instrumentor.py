"""`HermesInstrumentor`: the contrib-style face of the patches, for applications that embed Hermes.

Like every opentelemetry-python-contrib instrumentor: `HermesInstrumentor().instrument(tracer_provider=...,
meter_provider=...)` (the global providers when none is given), idempotent `uninstrument()`, registered under the
`opentelemetry_instrumentor` entry point, and a suppressed-instrumentation context passes calls through untraced.
Standalone it traces what the runners see: each provider attempt (`chat`), tool call (`execute_tool`) and
middleware layer, with rewrite events. Turn spans and observer records come from Hermes's hooks, which only the
plugin (`hermes plugins enable hermes_otel`) registers; the plugin applies the same patches without this class.
The wrappers have one owner: beside a loaded plugin, `instrument()` stands down (said once) and `uninstrument()`
leaves the plugin's wrappers in place; a plugin loaded after it leaves the instrumentor's alone.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ..emitter import Inline
from ..semconv import SCOPE as SCOPE_NAME
from ..version import __version__
from . import legacy

SCOPE = SCOPE_NAME


class HermesInstrumentor(BaseInstrumentor):
    """`instrument(tracer_provider=..., meter_provider=...)` / `uninstrument()` of Hermes's middleware machinery.

    The plugin passes `tracker` (a callable returning its live tracker) and `on_unloaded` instead of providers.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("hermes-agent >= 0.17.0",)  # the release that brought the middleware runners

    @staticmethod
    def available() -> bool:
        return _patches().available()

    def _instrument(self, **kwargs: Any) -> None:
        source = kwargs.get("tracker")
        if source is None:
            from ..tracking import Tracker

            tracer = trace.get_tracer(SCOPE, __version__, kwargs.get("tracer_provider"))
            meter = metrics.get_meter(SCOPE, __version__, kwargs.get("meter_provider"))
            tracker = Tracker(tracer, meter, emitter=Inline(), verdicts=False)  # no hooks: no verdicts
            source = lambda: tracker  # noqa: E731 - the patches read the tracker through a callable
        # The plugin's own patches when it is loaded (it passes its tracker): one owner for the wrappers, never
        # redirected or undone by the other.
        owner = "plugin" if kwargs.get("tracker") is not None else "instrumentor"
        _patches().instrument(source, kwargs.get("on_unloaded"), owner=owner)

    def _uninstrument(self, **kwargs: Any) -> None:
        _patches().uninstrument(owner="instrumentor")

    def adopt_registered(self, manager: Any) -> None:
        _patches().adopt_registered(manager)


def _patches() -> Any:
    """The 0.17-0.19 runner patches (capture/legacy/, loaded on first use)."""
    return legacy.load("patches").PATCHES
