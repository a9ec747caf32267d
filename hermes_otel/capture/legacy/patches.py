"""The patches that instrument Hermes's middleware machinery (wrapt), applied once per process.

The plugin applies them directly; :class:`~hermes_otel.capture.instrumentor.HermesInstrumentor` is their
contrib-style face for applications (it brings `opentelemetry-instrumentation`, which the plugin's start-up
does without).

Hermes 0.19.0's call sites import the runners from `hermes_cli.middleware` at
call time, and the runners look `_run_execution_chain` up as a module global,
so wrapping module attributes is enough:

* `run_llm_execution_middleware` / `run_tool_execution_middleware`: a `chat` /
  `execute_tool` span around the WHOLE chain — without a middleware of ours;
* `_run_execution_chain`: each registered layer becomes a span, nested in
  chain order, with the real call as the innermost span;
* `apply_llm_request_middleware` / `apply_tool_request_middleware` plus a
  transparent proxy around each request callback (put in place by
  `PluginContext.register_middleware`): rewrites and failures become events
  on the span of the call they affected;
* `agent.chat_completion_helpers.threading`: the provider request thread
  Hermes starts inherits our context, so HTTP-client spans nest under `chat`;
  there :mod:`hermes_otel.capture.streaming` times a streamed reply's chunks.

Everything passes values and exceptions through untouched. On a Hermes whose
runner reads its callbacks itself (0.20+), none of this is applied: the plugin
traces through the public contract (capture/calls.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import wrapt
from opentelemetry import context as otel_context

from ... import hermes_compat
from ..._internal import log as _log
from ..._internal.safety import safely
from ..._internal.suppress import unwrap
from ...middleware import contract
from ...middleware.layers import RequestPass, attribution, current_pass, request_proxy
from ...tracking import Tracker
from ..calls import traced_llm_call, traced_tool_call
from . import stream_diag

TrackerSource = Callable[[], "Tracker | None"]


class ContextThread(threading.Thread):
    """A Thread that runs under its creator's OpenTelemetry context (and nothing else of it:
    Hermes deliberately keeps its other contextvars out of these threads)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hermes_otel_context = otel_context.get_current()

    def run(self) -> None:
        token = otel_context.attach(self._hermes_otel_context)
        try:
            super().run()
        finally:
            otel_context.detach(token)


class _ThreadingWithContext(wrapt.ObjectProxy):
    """The `threading` module as seen by Hermes's provider-call helpers: Thread carries context."""

    Thread = ContextThread


class HermesPatches:
    """`instrument(tracker, on_unloaded)` / `uninstrument()` of Hermes's middleware machinery; idempotent, and
    one instance per process (:data:`PATCHES`): wrapt wraps module attributes, which exist once."""

    def __init__(self) -> None:
        self._tracker: TrackerSource = lambda: None
        self._on_unloaded: Callable[[], None] | None = None
        self.active = False
        self.owner: str | None = None  # "plugin" or "instrumentor": who put the wrappers in, and alone may move them

    @staticmethod
    def available() -> bool:
        return all(target.holder() is not None for target in (hermes_compat.LLM_RUNNER, hermes_compat.TOOL_RUNNER))

    def _wrappers(self) -> list[tuple[hermes_compat.Target, Callable[..., Any]]]:
        """What goes around each of Hermes's targets (hermes_compat lists them)."""
        return [(hermes_compat.LLM_RUNNER, self._wrap_llm), (hermes_compat.TOOL_RUNNER, self._wrap_tool),
                (hermes_compat.CHAIN_RUNNER, self._wrap_chain),
                *((target, self._apply_wrapper(kind)) for kind, target in hermes_compat.REQUEST_RUNNERS.items()),
                (hermes_compat.REGISTER_MIDDLEWARE, self._wrap_register), (hermes_compat.DISCOVER, self._wrap_discover)]

    def instrument(self, tracker: TrackerSource, on_unloaded: Callable[[], None] | None = None, *,
                   owner: str = "plugin") -> bool:
        """Wrap Hermes's runners (once): every wrapper reads the live tracker from `tracker` at call time. The
        wrappers have one owner: another's call changes nothing (no redirect of its spans) and returns False."""
        if self.active and owner != self.owner:
            _log.once(f"patches-owned:{owner}", "hermes-otel: Hermes's middleware runners are already traced by the "
                      "%s in this process; the %s stands down (one owner for the wrappers)", self.owner, owner,
                      level=logging.INFO)
            return False
        self._tracker, self._on_unloaded = tracker, on_unloaded
        if self.active:
            return True
        self.active, self.owner = True, owner
        for target, wrapper in self._wrappers():
            if target.holder() is not None:
                wrapt.wrap_function_wrapper(target.module, target.name, wrapper)
        if hermes_compat.legacy_internals().swap_http_threading(_ThreadingWithContext):
            stream_diag.install()  # chunk timing of streamed provider calls (they run on that thread)
        return True

    def uninstrument(self, owner: str | None = None) -> None:
        """Take the wrappers out (their owner's call, or anyone's with no `owner` given: tests, process end)."""
        if not self.active or (owner is not None and owner != self.owner):
            return
        self.active, self.owner = False, None
        for target, _wrapper in self._wrappers():
            held = target.holder()
            if held is not None:
                unwrap(*held)
        hermes_compat.legacy_internals().restore_http_threading(_ThreadingWithContext)
        stream_diag.release()

    def adopt_registered(self, manager: Any) -> None:
        """Put request proxies around request callbacks registered before we were instrumented."""
        registry = hermes_compat.middleware_registry(manager)
        if registry is None:
            return
        attribution.learn_modules(manager)
        for kind in contract.REQUEST_KINDS:
            callbacks = registry.get(kind)
            if isinstance(callbacks, list):
                callbacks[:] = [self._proxy(kind, cb, attribution.plugin_of(cb)) for cb in callbacks]

    # -- wrappers (run on the agent's and the tool workers' threads) ---------

    def _wrap_llm(self, wrapped, instance, args, kwargs):
        return traced_llm_call(self._tracker, wrapped, args, kwargs)

    def _wrap_tool(self, wrapped, instance, args, kwargs):
        return traced_tool_call(self._tracker, wrapped, args, kwargs)

    def _wrap_chain(self, wrapped, instance, args, kwargs):
        tracker = self._tracker()
        if tracker is None or len(args) < 3:
            return wrapped(*args, **kwargs)
        kind, callbacks, terminal_call = args[:3]
        traced = safely(tracker.layers.chain, kind, callbacks, terminal_call, kwargs)
        if traced is None:
            return wrapped(*args, **kwargs)
        layers, terminal = traced
        return wrapped(kind, layers, terminal, *args[3:], **kwargs)

    def _apply_wrapper(self, kind: str):
        def wrapper(wrapped, instance, args, kwargs):
            tracker = self._tracker()
            if tracker is None:
                return wrapped(*args, **kwargs)
            active = RequestPass(kind)
            token = current_pass.set(active)
            try:
                return wrapped(*args, **kwargs)
            finally:
                current_pass.reset(token)
                safely(tracker.request_pass_done, kind, kwargs, active.events)

        return wrapper

    def _wrap_register(self, wrapped, instance, args, kwargs):
        kind = args[0] if args else kwargs.get("kind")
        callback = args[1] if len(args) > 1 else kwargs.get("callback")
        manifest = getattr(instance, "manifest", None)
        plugin = getattr(manifest, "name", None) or attribution.plugin_of(callback)
        safely(attribution.remember, callback, plugin)
        if kind in contract.REQUEST_KINDS and callable(callback):
            return wrapped(kind, self._proxy(kind, callback, plugin))
        return wrapped(*args, **kwargs)

    def _wrap_discover(self, wrapped, instance, args, kwargs):
        result = wrapped(*args, **kwargs)
        # A re-discovery that no longer loads us (disabled, removed) leaves our wrappers in place:
        # without our hooks no turn would ever end, so stop tracing until we are registered again.
        hooks = hermes_compat.registered_hooks(instance)
        ours = any(getattr(cb, "__name__", "").startswith("hermes_otel_") for cbs in hooks.values() for cb in cbs)
        if not ours and self._on_unloaded is not None:
            safely(self._on_unloaded)
        return result

    def _proxy(self, kind: str, callback: Callable[..., Any], plugin: str) -> Callable[..., Any]:
        if getattr(callback, "_hermes_otel_request_proxy", False):
            return callback
        proxy = request_proxy(kind, callback, plugin, lambda: getattr(self._tracker(), "layers", None))
        attribution.remember(proxy, plugin)
        return proxy


PATCHES = HermesPatches()
