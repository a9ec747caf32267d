"""Hermes's private surface in one place (issue 25, 2.3): only `hermes_compat/` reads Hermes's private names (and
`capture/legacy/` rebinds some on 0.16-0.19), it knows the Hermes releases we test, and `doctor` says which Hermes it does not know and which names it
could not find. Explicit inputs (a version string, stand-in modules): no global state is changed."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from hermes_otel import hermes_compat
from hermes_otel.cli.main import compat_lines

PACKAGE = Path(hermes_compat.__file__).resolve().parents[1]
COMPAT = Path(hermes_compat.__file__).resolve()
# The one room that names anything of Hermes (capture/legacy/ supplies wrappers for the targets it lists).
ALLOWED = {path.resolve() for path in COMPAT.parent.glob("*.py")}

# Every private name of Hermes that hermes-otel reads, calls or rebinds (the list, and pricing's caches).
PRIVATE = frozenset({
    "_manager", "_middleware", "_hooks", "_plugins", "_run_execution_chain", "_DownstreamExecutionError",
    "_get_enabled_set", "_get_disabled_set", "_save_enabled_set", "_save_disabled_set",
    "_model_metadata_cache", "_endpoint_model_metadata_cache", "_normalize_base_url", "_is_openrouter_base_url",
    "_get_model_metadata_cache_path", "_load_model_metadata_disk_cache", "_build_call_kwargs",
})
REBOUND = frozenset({"threading", "fetch_model_metadata", "fetch_endpoint_model_metadata"})  # Hermes's, rebound
PRIVATE_MODULES = ("agent.model_metadata", "hermes_cli.plugins_cmd")
STORED = frozenset({"cell_contents"})  # a closure cell of Hermes's chain runner, written


def _hermes_module(name: object, imported: bool = False) -> bool:
    """A module of Hermes: its top-level name (imported), or a dotted name below one (`hermes_cli.middleware`; as a
    string, where a one-word string such as "tools" is as likely a key of ours)."""
    parts = name.split(".") if isinstance(name, str) else []
    return (bool(parts) and parts[0] in hermes_compat.TOP_LEVEL and all(p.isidentifier() for p in parts)
            and (imported or len(parts) > 1) and parts[-1] not in ("toml", "yaml", "json", "log", "py"))


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def touches(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """Where a module reads a Hermes private name (`x._manager`, `getattr(x, "_manager")`), imports a module
    only the private names are taken from, or rebinds a Hermes module's attribute (`helpers.threading = ...`).
    `self._hooks` and the like are our own objects' attributes."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id in (
                "self", "cls")):
            if node.attr in PRIVATE or (isinstance(node.ctx, ast.Store) and node.attr in REBOUND | STORED):
                found.append(f"{where} .{node.attr}")
        elif isinstance(node, ast.Constant) and id(node) not in docstrings and (
                node.value in PRIVATE | set(PRIVATE_MODULES) or _hermes_module(node.value)):
            found.append(f"{where} {node.value!r}")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level and (
                _hermes_module(node.module, imported=True) or any(a.name in PRIVATE for a in node.names)):
            found.append(f"{where} from {node.module} import")
        elif isinstance(node, ast.Import) and any(_hermes_module(a.name, imported=True) for a in node.names):
            found.append(f"{where} import {node.names[0].name}")
    return found


def test_only_the_compat_module_touches_hermes_private_names():
    elsewhere = [hit for path in sorted(PACKAGE.rglob("*.py")) if path.resolve() not in ALLOWED for hit in touches(path)]
    assert elsewhere == []
    # The check sees every one of them where they are (so the empty list above means something).
    seen = {hit.split(" ", 1)[1].strip(".'") for path in sorted(ALLOWED) for hit in touches(path)}
    assert PRIVATE | {"threading", *PRIVATE_MODULES} <= seen


def test_the_check_finds_these_names_in_the_old_shapes(tmp_path):
    source = tmp_path / "old.py"
    source.write_text("def f(ctx, manager, helpers, exc):\n"
                      "    m = ctx._manager\n"
                      "    hooks = getattr(manager, '_hooks', {})\n"
                      "    helpers.threading = None\n"
                      "    return type(exc).__name__ == '_DownstreamExecutionError'\n"
                      "from hermes_cli import plugins_cmd\n"
                      "plugins_cmd._get_enabled_set()\n")
    hits = sorted(hit.split(" ", 1)[1] for hit in touches(source, tmp_path))
    assert hits == ["'_DownstreamExecutionError'", "'_hooks'", "._get_enabled_set", "._manager", ".threading",
                    "from hermes_cli import"]


def test_the_check_finds_hermes_modules_named_imported_or_its_cells_written(tmp_path):
    source = tmp_path / "new.py"
    source.write_text('"""Docs may say hermes_cli.middleware."""\n'
                      "import agent.redact\n"
                      "def f(cell, table):\n"
                      "    cell.cell_contents = None\n"
                      "    return table['tools'], 'plugins.toml', 'hermes_cli.plugins'\n")
    hits = sorted(hit.split(" ", 1)[1] for hit in touches(source, tmp_path))
    assert hits == ["'hermes_cli.plugins'", ".cell_contents", "import agent.redact"]


@pytest.mark.parametrize(("version", "known"), [
    ("0.16.0", True), ("0.17.0", True), ("0.18.2", True), ("0.19.0", True), ("0.19.7", True),
    ("0.15.9", False), ("0.22.2.post1", True), ("0.23.0", False), ("1.0.0", False), (None, False),
])
def test_the_releases_we_know(version, known):
    assert hermes_compat.known(version) is known


def test_the_installed_hermes_is_known_and_has_every_name():
    checked = hermes_compat.check()
    assert checked == hermes_compat.Check("0.19.0", True, [])
    assert compat_lines(checked) == [("ok", "every Hermes private name hermes-otel uses was found")]


def test_doctor_says_which_names_a_hermes_lacks():
    """A Hermes 0.19 whose chain runner and plugin-list helpers were renamed (stand-in modules)."""

    def run(kind, callbacks, terminal):  # no nested _DownstreamExecutionError
        return terminal()

    modules = {"hermes_cli.middleware": types.SimpleNamespace(_run_chain=run),
               "hermes_cli.plugins_cmd": types.SimpleNamespace(get_enabled=set)}
    checked = hermes_compat.check("0.19.0", modules)
    assert checked == hermes_compat.Check("0.19.0", True, [
        "hermes_cli.middleware._run_execution_chain", "hermes_cli.middleware._run_execution_chain._DownstreamExecutionError",
        "hermes_cli.plugins_cmd._get_enabled_set", "hermes_cli.plugins_cmd._get_disabled_set",
        "hermes_cli.plugins_cmd._save_enabled_set", "hermes_cli.plugins_cmd._save_disabled_set"])
    assert compat_lines(checked) == [("warn", (
        "Hermes private names hermes-otel could not find: hermes_cli.middleware._run_execution_chain, "
        "hermes_cli.middleware._run_execution_chain._DownstreamExecutionError, hermes_cli.plugins_cmd._get_enabled_set, "
        "hermes_cli.plugins_cmd._get_disabled_set, hermes_cli.plugins_cmd._save_enabled_set, "
        "hermes_cli.plugins_cmd._save_disabled_set (what needs them is off or falls back; hermes_compat/)"))]


def test_doctor_says_when_it_does_not_know_the_release():
    checked = hermes_compat.check("0.23.1")  # the installed 0.19.0's modules, under a version we have not read
    assert checked == hermes_compat.Check("0.23.1", False, [])
    assert compat_lines(checked) == [
        ("warn", "hermes-agent 0.23.1 is a release hermes-otel has not been tested with: tracing and pricing use "
                 "what they find"),
        ("ok", "every Hermes private name hermes-otel uses was found")]


def test_a_release_is_not_asked_for_names_it_never_had():
    """0.16.0 has no middleware: its absence is no finding (stand-in modules without it)."""
    modules = {"hermes_cli.middleware": None}
    assert "hermes_cli.middleware._run_execution_chain" not in hermes_compat.check("0.16.0", modules).missing
    assert "hermes_cli.middleware._run_execution_chain" in hermes_compat.check("0.17.0", modules).missing


def test_downstream_error_is_recognised_by_name_and_shape():
    class _DownstreamExecutionError(Exception):
        def __init__(self, original):
            self.original = original

    assert hermes_compat.is_downstream_error(_DownstreamExecutionError(ValueError()))
    assert not hermes_compat.is_downstream_error(ValueError())
    assert not hermes_compat.is_downstream_error(type("_DownstreamExecutionError", (Exception,), {})())


def test_our_layer_is_put_first_in_the_registry_hermes_appends_to():
    """Hermes runs a kind's layers in registration order (0.20+: plugins load by `requires_plugins`, then by name):
    ours goes to the head of the same list, whatever registered before it, and what registers later goes after."""
    def layer(name):
        def callback(**kwargs):
            return kwargs["next_call"](kwargs["request"])
        callback.__name__ = name
        return callback

    acme, flaky, ours, later = (layer(n) for n in ("acme", "flaky", "ours", "later"))
    registered = [acme, flaky, ours]
    manager = types.SimpleNamespace(_middleware={"llm_execution": registered})
    assert hermes_compat.run_first(manager, "llm_execution", ours)
    registered.append(later)  # a plugin loaded after ours
    assert manager._middleware["llm_execution"] is registered and registered == [ours, acme, flaky, later]
    assert hermes_compat.run_first(manager, "llm_execution", ours) and registered == [ours, acme, flaky, later]
    # Nothing changed where ours is not registered, or the registry is not the list Hermes keeps.
    assert not hermes_compat.run_first(manager, "tool_execution", ours)
    assert not hermes_compat.run_first(types.SimpleNamespace(_middleware={"llm_execution": (acme, ours)}),
                                       "llm_execution", ours)
    assert not hermes_compat.run_first(types.SimpleNamespace(), "llm_execution", ours)


def test_a_hermes_that_keeps_middleware_elsewhere_is_said_with_the_plugins_it_hides(monkeypatch):
    """Where `run_first` cannot work (a 0.20+ Hermes whose manager keeps no `_middleware`), doctor, enable and the
    log say whose layers run outside our spans: the enabled plugins that load before hermes_otel by name."""
    class PluginManager:
        def __init__(self):
            self._hooks = {}

    monkeypatch.setattr(hermes_compat, "public_surfaces", lambda: True)
    monkeypatch.setattr(hermes_compat, "_module", lambda name: types.SimpleNamespace(PluginManager=PluginManager))
    config = {"plugins": {"enabled": ["zz_audit", "acme_guard", "hermes_otel", "cache_flaky"]}}
    line = hermes_compat.unseen_layers(config)
    assert line is not None and line.endswith("enabled and loading before it by name: acme_guard, cache_flaky")
    assert hermes_compat.degraded(config)[0] == line

    class KeepsIt:
        def __init__(self):
            self._middleware = {}  # where Hermes 0.20-0.22 keep it: nothing to say

    monkeypatch.setattr(hermes_compat, "_module", lambda name: types.SimpleNamespace(PluginManager=KeepsIt))
    assert hermes_compat.unseen_layers(config) is None
