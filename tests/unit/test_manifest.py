"""plugin.yaml says what the code does: the hooks and middleware register() registers (Hermes's validator compares
them), and the Python dependencies a directory install gets are pyproject's runtime dependencies."""

from __future__ import annotations

import tomllib
from pathlib import Path

import hermes_otel
from hermes_otel.capture.bridge import HOOKS
from hermes_otel.capture.calls import execution_middleware
from hermes_otel.config.schema import FIELDS_BY_KEY
from hermes_otel.hermes_compat import yaml_module

PACKAGE = Path(hermes_otel.__file__).resolve().parent
MANIFEST = yaml_module().safe_load((PACKAGE / "plugin.yaml").read_text(encoding="utf-8"))


def test_the_manifest_is_v2_and_names_the_hermes_it_needs():
    assert (MANIFEST["manifest_version"], MANIFEST["name"], MANIFEST["requires_hermes"]) == (2, "hermes_otel", ">=0.16")


def test_provides_hooks_are_the_hooks_we_subscribe_to_by_default():
    """Hermes's validator warns about a declared hook register() does not register: the defaults leave one out."""
    excluded = FIELDS_BY_KEY["observer_exclude_hooks"].default
    assert excluded == ["pre_api_request"]
    assert MANIFEST["provides_hooks"] == [hook for hook in HOOKS if hook not in excluded]


def test_provides_middleware_is_what_register_adds():
    assert MANIFEST["provides_middleware"] == list(execution_middleware(lambda: None))


def test_python_dependencies_are_pyprojects():
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert MANIFEST["python_dependencies"] == project["dependencies"]
    assert MANIFEST["version"] == project["version"]


def test_the_dashboard_tab_ships_in_the_plugins_folder_at_the_packages_version():
    import json

    tab = json.loads((PACKAGE / "dashboard" / "manifest.json").read_text(encoding="utf-8"))
    assert (tab["name"], tab["version"], tab["api"]) == ("hermes_otel", hermes_otel.__version__, "api.py")
    assert (PACKAGE / "dashboard" / tab["entry"]).is_file() and (PACKAGE / "dashboard" / tab["css"]).is_file()
