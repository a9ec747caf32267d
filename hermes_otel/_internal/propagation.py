"""The propagators `OTEL_PROPAGATORS` names, where one bad entry costs only itself.

`opentelemetry.propagate` builds the global propagator as it is first imported and raises for a name it cannot
load: importing it at the top of a module made a typo (`b3` without its package) fail the plugin's whole load.
Here the global propagator is used whenever it can be (a host's `set_global_textmap` included); where importing it
fails, the same names are loaded one by one from the same entry points, and an unknown or failing one is reported
once and left out: the others, and all telemetry, go on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import TextMapPropagator

from . import log as _log

VARIABLE = "OTEL_PROPAGATORS"
_GROUP = "opentelemetry_propagator"
_DEFAULT = "tracecontext,baggage"
_own: list[TextMapPropagator] = []  # built once, where the global one could not be


def textmap() -> TextMapPropagator:
    """The propagator to inject and extract with."""
    loaded = sys.modules.get("opentelemetry.propagate")
    if loaded is not None:
        return loaded.get_global_textmap()
    if not _own:
        try:
            from opentelemetry import propagate

            return propagate.get_global_textmap()
        except Exception:  # noqa: BLE001 - a name it cannot load: ours, without that name
            _own.append(_tolerant(os.environ))
    return _own[0]


def _load(name: str) -> TextMapPropagator:
    from opentelemetry.util._importlib_metadata import entry_points

    found = list(entry_points(group=_GROUP, name=name))
    if not found:
        raise LookupError("no such propagator is installed (misspelled, or its package is missing)")
    return found[0].load()()


def _loaded(env: Mapping[str, str]) -> tuple[list[TextMapPropagator], list[tuple[str, str]]]:
    """The propagators `OTEL_PROPAGATORS` names that load, and (name, why) for each that does not."""
    names = [name.strip() for name in env.get(VARIABLE, _DEFAULT).split(",") if name.strip()]
    if any(name.lower() == "none" for name in names):
        return [], []
    chosen, bad = [], []
    for name in names:
        try:
            chosen.append(_load(name))
        except Exception as exc:  # noqa: BLE001 - whatever loading it raised is the reason
            bad.append((name, str(exc) if isinstance(exc, LookupError) else f"{type(exc).__name__}: {exc}"))
    return chosen, bad


def problems(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, why) for each entry of `OTEL_PROPAGATORS` that cannot be used (for `doctor`)."""
    return _loaded(env)[1]


def _tolerant(env: Mapping[str, str]) -> TextMapPropagator:
    chosen, bad = _loaded(env)
    for name, why in bad:
        _log.once(f"propagator:{name}", "hermes-otel: %s names the propagator %r, which cannot be used (%s): left "
                  "out; the other propagators and all telemetry go on", VARIABLE, name, why)
    return CompositePropagator(chosen)
