"""Every private name of Hermes that hermes-otel touches, in one place, with the Hermes versions we know.

Hermes's public plugin API (hooks, `register_middleware`, `estimate_usage_cost`) covers most of what we do. The
rest reads or rebinds names Hermes keeps private; they are all here, so a Hermes upgrade that renames one breaks
this file only, and `hermes-otel doctor` (:func:`check`) says which Hermes it does not know and which names it
could not find. Every accessor fails soft: a missing name gives None / an empty value, never an exception.

Cheap to import (stdlib only): the plugin imports it at load; Hermes's modules are imported only when asked.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

KNOWN = ((0, 16), (0, 17), (0, 18), (0, 19))  # the Hermes releases tested (tests/matrix): 0.16.0 to 0.19.x
SUPPORTED_RANGE = "0.16.0 to 0.19.x"  # as pyproject's `hermes` extra states it

MIDDLEWARE = "hermes_cli.middleware"
PLUGINS = "hermes_cli.plugins"
HTTP_THREAD_MODULE = "agent.chat_completion_helpers"
CHAIN = "_run_execution_chain"  # hermes_cli.middleware: runs one kind's layers around the real call (0.17+)
DOWNSTREAM_ERROR = "_DownstreamExecutionError"  # a class inside CHAIN that wraps a downstream failure (0.17+)
# agent.auxiliary_client: builds each auxiliary attempt's request from the route Hermes resolved (provider, model,
# base URL); wrapped so the call's span learns the route (0.16+).
AUX_ROUTE = "_build_call_kwargs"


def version_key(version: str) -> tuple[int, ...]:
    """(0, 19, 0) from "0.19.0" (or "0.19.0rc1")."""
    parts = []
    for part in version.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def known(version: str | None) -> bool:
    """A Hermes release whose private names we have read (its major.minor is in KNOWN)."""
    return version is not None and version_key(version)[:2] in KNOWN


def installed_version() -> str | None:
    """The running Hermes's version (`hermes_cli.__version__`: what every Hermes process has imported already)."""
    try:
        value = getattr(importlib.import_module("hermes_cli"), "__version__", None)
    except Exception:  # noqa: BLE001 - no Hermes
        return None
    return value if isinstance(value, str) else None


def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any import failure means "not this Hermes"
        return None


# -- the plugin manager (hermes_cli.plugins) ----------------------------------------------------------------------


def plugin_manager(ctx: Any) -> Any:
    """The PluginManager behind a PluginContext (`ctx._manager`), or None."""
    return getattr(ctx, "_manager", None)


def middleware_registry(manager: Any) -> dict[str, list] | None:
    """The manager's registered middleware by kind (`_middleware`, 0.17+), or None."""
    registry = getattr(manager, "_middleware", None)
    return registry if isinstance(registry, dict) else None


def registered_hooks(manager: Any) -> dict[str, list]:
    """The manager's hook callbacks by hook name (`_hooks`)."""
    hooks = getattr(manager, "_hooks", None)
    return hooks if isinstance(hooks, dict) else {}


def loaded_plugins(manager: Any) -> list[Any]:
    """The manager's LoadedPlugin records (`_plugins`: each has `.module` and `.manifest`)."""
    plugins = getattr(manager, "_plugins", None)
    return list(plugins.values()) if isinstance(plugins, dict) else []


def is_downstream_error(exc: BaseException) -> bool:
    """Hermes's chain runner wraps a downstream error in a private class it defines inside the runner:
    recognised by name and shape, never imported."""
    return type(exc).__name__ == DOWNSTREAM_ERROR and hasattr(exc, "original")


def _cells(function: Any) -> dict[str, Any]:
    """A function's closure cells by free-variable name."""
    code, closure = getattr(function, "__code__", None), getattr(function, "__closure__", None)
    return dict(zip(code.co_freevars, closure, strict=True)) if code is not None and closure else {}


def running_chain(next_call: Any) -> tuple[list, Any] | None:
    """The callbacks of the chain run that handed a layer `next_call`, and the cell of its terminal call
    (0.20+: `_run_execution_chain(kind, terminal_call, **kwargs)` copies the registered callbacks for each run
    into its closure, beside `terminal_call`; `next_call` closes over its `call_at`). None for another runner."""
    run = _cells(next_call).get("call_at")
    cells = _cells(run.cell_contents) if run is not None else {}
    callbacks, terminal = cells.get("callbacks"), cells.get("terminal_call")
    if callbacks is None or terminal is None:
        return None
    try:
        if type(callbacks.cell_contents) is not list or not callable(terminal.cell_contents):
            return None
    except ValueError:  # an empty cell
        return None
    return callbacks.cell_contents, terminal


def runner_takes_callbacks() -> bool | None:
    """Whether Hermes's chain runner is handed the callbacks (0.17-0.19: `(kind, callbacks, terminal_call,
    **kwargs)`), or reads them itself (0.20+: `(kind, terminal_call, **kwargs)`); None without a runner."""
    import inspect

    runner = getattr(_module(MIDDLEWARE), CHAIN, None)
    if not callable(runner):
        return None
    try:
        return "callbacks" in inspect.signature(runner).parameters
    except (TypeError, ValueError):
        return None


# -- plugins.enabled / plugins.disabled in Hermes's config.yaml (hermes_cli.plugins_cmd) ------------------------


def plugin_sets() -> tuple[set[str], set[str]]:
    """(enabled, disabled) plugin names, read by Hermes's own `hermes plugins` helpers."""
    from hermes_cli import plugins_cmd

    return set(plugins_cmd._get_enabled_set()), set(plugins_cmd._get_disabled_set())


def save_plugin_sets(enabled: set[str], disabled: set[str]) -> None:
    """Write both lists as `hermes plugins enable/disable` writes them."""
    from hermes_cli import plugins_cmd

    plugins_cmd._save_enabled_set(enabled)
    plugins_cmd._save_disabled_set(disabled)


# -- the provider request thread (agent.chat_completion_helpers) ------------------------------------------------


def swap_http_threading(make_proxy: Callable[[types.ModuleType], Any]) -> bool:
    """Give Hermes's provider-call helpers `make_proxy(threading)` as their `threading` (they start the
    provider request's thread from it), if they still see the real module; True when swapped."""
    helpers = _module(HTTP_THREAD_MODULE)
    if helpers is None or getattr(helpers, "threading", None) is not threading:
        return False
    helpers.threading = make_proxy(threading)  # type: ignore[attr-defined]
    return True


def restore_http_threading(proxy_type: type) -> None:
    """Undo :func:`swap_http_threading` (when what is there is still our `proxy_type`)."""
    helpers = _module(HTTP_THREAD_MODULE)
    if helpers is not None and isinstance(getattr(helpers, "threading", None), proxy_type):
        helpers.threading = threading  # type: ignore[attr-defined]


# -- pricing: what Hermes has cached of the prices it fetches (agent.model_metadata) ----------------------------


class NotCached(Exception):
    """Hermes's pricing asked for metadata it would have to fetch."""


# What pricing reads of agent.model_metadata (0.16+; the on-disk copy of OpenRouter's list is 0.17+, optional).
_METADATA = ("_model_metadata_cache", "_endpoint_model_metadata_cache", "_normalize_base_url",
             "_is_openrouter_base_url")
_METADATA_DISK = ("_get_model_metadata_cache_path", "_load_model_metadata_disk_cache")
_cache_only = threading.local()  # set while hermes-otel prices on this thread
_disk: list[Any] = [None, {}]  # (path, mtime, size) of Hermes's OpenRouter file and what it held


def _openrouter_cached(metadata: types.ModuleType) -> dict:
    cached = metadata._model_metadata_cache  # rebound by Hermes on every refresh: read it each time
    if cached:
        return cached
    if hasattr(metadata, "_load_model_metadata_disk_cache"):  # 0.17+: Hermes keeps a copy on disk
        path = metadata._get_model_metadata_cache_path()
        try:
            stat = path.stat()
        except OSError:
            raise NotCached("openrouter") from None
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        if _disk[0] != key:  # parsed again only when the file changes
            _disk[:] = [key, metadata._load_model_metadata_disk_cache() or {}]
        if _disk[1]:
            return _disk[1]
    raise NotCached("openrouter")


@functools.lru_cache(maxsize=64)
def _endpoint_key(metadata: types.ModuleType, base_url: str) -> str:
    """Where Hermes caches an endpoint's metadata ("" for none: OpenRouter's and empty URLs); a pure function of
    the URL, whose parsing was most of what pricing a custom endpoint cost."""
    normalized = metadata._normalize_base_url(base_url)
    return "" if not normalized or metadata._is_openrouter_base_url(normalized) else normalized


def _endpoint_cached(metadata: types.ModuleType, base_url: str) -> dict:
    normalized = _endpoint_key(metadata, base_url)
    if not normalized:
        return {}  # Hermes fetches nothing for these either
    cached = metadata._endpoint_model_metadata_cache.get(normalized)
    if cached is None:
        raise NotCached(normalized)
    return cached


def _guarded(hermes: Callable[..., Any], ours: Callable[..., Any]) -> Callable[..., Any]:
    """`ours` on a thread that prices for hermes-otel, Hermes's own function everywhere else."""
    def on_otel_pricing_thread_ours(*args: Any, **kwargs: Any) -> Any:
        if getattr(_cache_only, "on", False):
            return ours(*args, **kwargs)
        return hermes(*args, **kwargs)

    on_otel_pricing_thread_ours._hermes_otel_original = hermes  # type: ignore[attr-defined]
    return on_otel_pricing_thread_ours


_guard_lock = threading.Lock()


def cache_only_pricing() -> types.ModuleType | None:
    """Hermes's `agent.usage_pricing`, made to read only Hermes's caches while :func:`pricing_from_cache` is on,
    or None (an unknown Hermes, or one without these names: costs are unknown).

    Its two fetchers (OpenRouter's model list, an endpoint's `/models`) and its route resolution are rebound, once,
    to wrappers that call Hermes's own function on every other thread: Hermes keeps fetching as it always did."""
    if not known(installed_version()):
        return None
    pricing, metadata = _module("agent.usage_pricing"), _module("agent.model_metadata")
    if pricing is None or metadata is None or not all(hasattr(metadata, n) for n in _METADATA):
        return None
    resolve = getattr(pricing, "resolve_billing_route", None)
    resolve = getattr(resolve, "_hermes_otel_original", resolve)
    if not callable(resolve):
        return None
    ours: dict[str, Callable[..., Any]] = {"fetch_model_metadata": lambda *a, **k: _openrouter_cached(metadata),
            "fetch_endpoint_model_metadata": lambda url, *a, **k: _endpoint_cached(metadata, url),
            # A pure function of its arguments (a frozen BillingRoute), called twice per price: its URL parsing
            # was most of what pricing cost.
            "resolve_billing_route": functools.lru_cache(maxsize=256)(resolve)}
    if not all(callable(getattr(pricing, name, None)) for name in ours):
        return None
    with _guard_lock:
        for name, replacement in ours.items():
            original = getattr(pricing, name)
            if not hasattr(original, "_hermes_otel_original"):
                setattr(pricing, name, _guarded(original, replacement))
    return pricing


class pricing_from_cache:  # noqa: N801 - used as a `with` statement
    """While on, Hermes's pricing on this thread reads only what Hermes has cached (at any age); a route it would
    fetch raises :class:`NotCached`."""

    def __enter__(self) -> None:
        _cache_only.on = True

    def __exit__(self, *exc: object) -> None:
        _cache_only.on = False


# -- doctor ---------------------------------------------------------------------------------------------------


class Check(NamedTuple):
    version: str | None
    known: bool
    missing: list[str]  # private names this Hermes should have (by its version) and does not


def _has_const_code(function: Any, name: str) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and any(isinstance(c, types.CodeType) and c.co_name == name for c in code.co_consts)


def _stores(cls: Any, name: str) -> bool:
    """`cls.__init__` sets `self.<name>` (instance attributes exist only on instances)."""
    code = getattr(getattr(cls, "__init__", None), "__code__", None)
    return code is not None and name in code.co_names


def _imports_threading(name: str) -> bool:
    """The module's source imports `threading` at its top level: read, not imported (importing Hermes's agent
    helpers creates a ~/.hermes skeleton, and doctor must leave no trace)."""
    import ast
    import importlib.util

    module = sys.modules.get(name)
    if module is not None:
        return hasattr(module, "threading")
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return False
    with open(spec.origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    return any(isinstance(node, ast.Import) and any(a.name == "threading" and a.asname is None for a in node.names)
               for node in tree.body)


def _probes(given: Mapping[str, Any]) -> list[tuple[str, tuple[int, int], Callable[[], bool]]]:
    """(name, the first release that has it, is it there)."""

    def mod(name: str) -> Any:
        return given[name] if name in given else sys.modules.get(name) or _module(name)

    plugins, middleware = mod(PLUGINS), mod(MIDDLEWARE)
    manager, context = getattr(plugins, "PluginManager", None), getattr(plugins, "PluginContext", None)
    return [
        ("hermes_cli.plugins.PluginContext._manager", (0, 16), lambda: _stores(context, "_manager")),
        ("hermes_cli.plugins.PluginManager._hooks", (0, 16), lambda: _stores(manager, "_hooks")),
        ("hermes_cli.plugins.PluginManager._plugins", (0, 16), lambda: _stores(manager, "_plugins")),
        ("hermes_cli.plugins.PluginManager._middleware", (0, 17), lambda: _stores(manager, "_middleware")),
        (f"hermes_cli.middleware.{CHAIN}", (0, 17), lambda: callable(getattr(middleware, CHAIN, None))),
        (f"hermes_cli.middleware.{CHAIN}.{DOWNSTREAM_ERROR}", (0, 17),
         lambda: _has_const_code(getattr(middleware, CHAIN, None), DOWNSTREAM_ERROR)),
        *((f"hermes_cli.plugins_cmd.{n}", (0, 16), lambda n=n: hasattr(mod("hermes_cli.plugins_cmd"), n))
          for n in ("_get_enabled_set", "_get_disabled_set", "_save_enabled_set", "_save_disabled_set")),
        (f"agent.auxiliary_client.{AUX_ROUTE}", (0, 16),
         lambda: callable(getattr(mod("agent.auxiliary_client"), AUX_ROUTE, None))),
        (f"{HTTP_THREAD_MODULE}.threading", (0, 16), lambda: hasattr(given[HTTP_THREAD_MODULE], "threading")
         if HTTP_THREAD_MODULE in given else _imports_threading(HTTP_THREAD_MODULE)),
        *((f"agent.model_metadata.{n}", (0, 16), lambda n=n: hasattr(mod("agent.model_metadata"), n))
          for n in _METADATA),
        *((f"agent.model_metadata.{n}", (0, 17), lambda n=n: hasattr(mod("agent.model_metadata"), n))
          for n in _METADATA_DISK),
    ]


def check(version: str | None = None, modules: Mapping[str, Any] | None = None) -> Check:
    """The installed Hermes (or `version`): is it a release we know, and which private names are missing
    (`modules` stands in for Hermes's modules by name). Imports Hermes's modules: for `doctor`, not the plugin."""
    version = version if version is not None else installed_version()
    release = version_key(version)[:2] if version else (0, 0)
    wanted = [(name, present) for name, since, present in _probes(modules or {})
              if not known(version) or release >= since]
    missing = []
    for name, present in wanted:
        try:
            found = present()
        except Exception:  # noqa: BLE001 - a probe that fails is a name we cannot find
            found = False
        if not found:
            missing.append(name)
    return Check(version, known(version), missing)
