"""The package directory is also a Hermes directory plugin ($HERMES_HOME/plugins/hermes_otel)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import hermes_otel

pytestmark = pytest.mark.hermes


def test_directory_layout_loads_through_hermes(tmp_path):
    from hermes_cli.plugins import PluginManager

    plugin_dir = tmp_path / "plugins" / "hermes_otel"
    shutil.copytree(Path(hermes_otel.__file__).parent, plugin_dir, ignore=shutil.ignore_patterns("__pycache__"))
    manager = PluginManager()
    manifest = manager._parse_manifest(plugin_dir / "plugin.yaml", plugin_dir, source="user", prefix="")
    assert (manifest.name, manifest.kind, manifest.key) == ("hermes_otel", "standalone", "hermes_otel")
    assert "on_session_end" in manifest.provides_hooks
    try:
        module = manager._load_directory_module(manifest)
        assert module.__name__ == "hermes_plugins.hermes_otel" and callable(module.register)
        # Relative imports: the copy runs from its own files, not from the installed package.
        runtime = sys.modules["hermes_plugins.hermes_otel.runtime"]
        assert Path(runtime.__file__).parent == plugin_dir
    finally:
        for name in [n for n in sys.modules if n.startswith("hermes_plugins.hermes_otel")]:
            del sys.modules[name]
