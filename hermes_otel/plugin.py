"""`register(ctx)`: the Hermes plugin entry point.

Reads the configuration, makes the telemetry pipeline live (reusing it when
unchanged), instruments Hermes's middleware runners and registers the
observer hooks. Never raises into Hermes: a broken configuration or an
internal fault is reported once and the agent runs on.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

from . import hermes_compat, runtime
from ._internal import log as _log
from ._internal.safety import safely
from .capture import legacy
from .capture import logs as hermes_logs
from .capture.calls import execution_middleware
from .capture.hooks import callbacks, hook_names
from .capture.hooks_only import auxiliary_callbacks, chat_callbacks
from .config import load_settings
from .middleware import log_hygiene

_last_mode: str | None = None


def register(ctx: Any) -> None:
    try:
        _register(ctx)
    except Exception as exc:  # noqa: BLE001 - a plugin must never break Hermes's start-up
        _log.logger.error("hermes-otel: disabled after an internal error during register(): %s", exc, exc_info=True)


def _instrumented(public: bool) -> bool:
    """Hermes's middleware runners wrapped (once per process), on a Hermes whose runner is handed its callbacks and
    that is not of the 0.20+ line (`public`: traced through its public plugin surfaces only)."""
    if public or not hermes_compat.runner_takes_callbacks():
        return False
    patches = legacy.load("patches").PATCHES
    if patches.available():
        # Beside an application's HermesInstrumentor the wrappers stay its own (its providers get the call spans):
        # never redirected, and not doubled by another way of tracing the same calls.
        patches.instrument(runtime.current_tracker, runtime.stop_tracing)
    return patches.active


def _relay_in_core(settings: Any, path: Path | None) -> Any:
    """Hermes 0.20+ runs NeMo Relay itself (from HERMES_NEMO_RELAY_PLUGINS_TOML or Relay's own files): the hand-off
    to Relay's runtime is retired there, and a document Hermes's Relay reads too has its `observability` component
    exported by Relay alone (ours would be a second copy of every trace and event)."""
    if settings.relay_handoff:
        _log.once("relay-handoff-retired", "hermes-otel: relay_handoff is ignored on this Hermes, which runs NeMo "
                  "Relay itself: Relay exports the observability component of the plugins.toml Hermes gives it "
                  "(HERMES_NEMO_RELAY_PLUGINS_TOML); see docs/relay.md", level=logging.WARNING)
        settings = dataclasses.replace(settings, relay_handoff=False)
    relay_file = os.environ.get("HERMES_NEMO_RELAY_PLUGINS_TOML", "").strip()
    shared = path is not None and relay_file and Path(relay_file).expanduser() == path
    if shared and (settings.relay_span_endpoints or settings.atof_sinks or settings.relay_log_targets
                   or settings.relay_metric_targets):
        _log.once("relay-core-owns", "hermes-otel: %s is also NeMo Relay's document in this Hermes "
                  "(HERMES_NEMO_RELAY_PLUGINS_TOML): Relay exports its observability component, hermes-otel's copies "
                  "of those endpoints and ATOF sinks stand down. Relay refuses a component of kind hermes_otel: keep "
                  "hermes-otel's own settings in a file of their own (HERMES_OTEL_PLUGINS_TOML)", path,
                  level=logging.WARNING)
        settings = dataclasses.replace(settings, relay_span_endpoints=(), relay_log_targets=(),
                                       relay_metric_targets=(), atof_sinks=())
    return settings


def _tab_in_place() -> None:
    """The dashboard's Traces tab where Hermes looks for it, however the plugin was enabled (`hermes plugins
    enable` writes no tab; a directory plugin ships its own): one stat when it is there (`hermes-otel enable`
    updates it, `doctor` says when it is stale), written by the first run of a home that has none."""
    from .config import hermes_home

    home = hermes_home(os.environ)
    if (home / "plugins" / "hermes_otel" / "dashboard" / "manifest.json").is_file():
        return
    from .tab import install

    try:
        said = install.install(home)
    except OSError as exc:  # a read-only home: `hermes-otel doctor` says the tab is missing
        _log.once("tab-not-written", "hermes-otel: the dashboard's Traces tab could not be written (%s)", exc,
                  level=logging.INFO)
        return
    if said.startswith("installed"):
        _log.logger.info("hermes-otel: %s", said)


def _http_client() -> Any:
    """capture/http_client.py, imported by name: it wraps httpx's transports, and Hermes 0.2x's validator counts
    every package installed beside Hermes (httpx included) as Hermes core when it follows our imports."""
    return importlib.import_module(".capture.http_client", __package__)


def _register(ctx: Any) -> None:
    global _last_mode
    _log.reset()  # a reload makes once-reported problems visible again
    try:
        result = load_settings()
    except Exception as exc:  # noqa: BLE001 - an unforeseen config shape: defaults, and say so
        _log.logger.error("hermes-otel: configuration could not be read (%s: %s); using defaults",
                          type(exc).__name__, exc)
        result = load_settings(env={k: v for k, v in os.environ.items() if k == "HERMES_HOME"}, path=Path(os.devnull))
    message = result.message()
    if message:
        level = logging.ERROR if result.file_rejected else logging.WARNING
        _log.logger.log(level, message)
    public = hermes_compat.public_surfaces()  # the 0.20+ line: nothing of Hermes is rebound
    if public:
        result = dataclasses.replace(result, settings=_relay_in_core(result.settings, result.path))
    tracker = runtime.configure(result.settings)
    if tracker is None:
        mode = "disabled"
    elif _instrumented(public):
        mode = "instrumented"
        legacy.load("patches").PATCHES.adopt_registered(hermes_compat.plugin_manager(ctx))
    elif callable(getattr(ctx, "register_middleware", None)):
        mode = "middleware"
        manager = hermes_compat.plugin_manager(ctx)
        for kind, callback in execution_middleware(runtime.current_tracker, manager).items():
            ctx.register_middleware(kind, callback)
            # Outermost, so every other plugin's layer is a span inside ours, whenever that plugin loads.
            if not hermes_compat.run_first(manager, kind, callback):
                _log.once(f"layers:not-first:{kind}", "hermes-otel: this Hermes keeps its middleware where hermes-otel "
                          "cannot put its own layer first: %s layers of plugins loaded before hermes_otel run "
                          "outside its spans and are not traced (the first traced call names them)", kind)
        tracker.rewrites_from_trace = True  # Hermes's request passes are not watched: its middleware_trace says
    else:  # a Hermes without middleware (0.16.0): chat spans from hooks, registered before the bridge's
        mode = "hooks"
        for hook, callback in chat_callbacks(runtime.current_tracker).items():
            ctx.register_hook(hook, callback)
    # Hermes's warning about a failing middleware, once and then at DEBUG (0.17-0.19 warn on every call; 0.20+
    # report once themselves, so nothing is added there).
    log_hygiene.install(result.settings.middleware_log_dedupe and mode == "instrumented")
    if tracker is not None and not public:
        # model calls outside the main loop (0.16-0.19; 0.21+ report them: pre/post_auxiliary_call, below)
        safely(legacy.load("auxiliary").instrument, runtime.current_tracker)
    if tracker is not None and result.settings.http_client_spans:
        safely(_http_client().instrument, runtime.http_tracer_provider)  # the provider is looked up per request
    elif (loaded := sys.modules.get(f"{__package__}.capture.http_client")) is not None:
        safely(loaded.release)  # the setting or telemetry turned off: httpx as it was
    settings = result.settings
    safely(hermes_logs.install, runtime.hermes_log_sink,
           settings.hermes_log_level if tracker is not None and settings.logs_enabled else "off")
    if tracker is not None and "pre_auxiliary_call" in hook_names():  # spans of the auxiliary calls it reports
        for hook, callback in auxiliary_callbacks(runtime.current_tracker).items():
            ctx.register_hook(hook, callback)  # before the bridge's: each record finds its span
    if tracker is not None:
        for hook, callback in callbacks(runtime.current_bridge, runtime.flush).items():
            if hook not in result.settings.observer_exclude_hooks:
                ctx.register_hook(hook, callback)
    if tracker is not None:
        safely(_tab_in_place)
    if mode != _last_mode and mode == "middleware":
        for text in hermes_compat.degraded():  # once per process (and again when the mode changes)
            _log.logger.info("hermes-otel: degraded on this Hermes: %s", text)
    if mode != _last_mode:
        _log.logger.info(
            "hermes-otel %s: %s",
            mode,
            {
                "instrumented": "tracing Hermes's middleware runners (each call one span)",
                "middleware": "tracing through Hermes's middleware contract (a middleware of ours around each call, "
                "a span per layer)",
                "hooks": "this Hermes has no middleware: hooks-only telemetry (turn, chat and tool spans from "
                "its observer hooks, every observer record; no middleware layer spans)",
                "disabled": "telemetry is off (OTEL_SDK_DISABLED or plugins.toml)",
            }[mode],
        )
        _last_mode = mode
