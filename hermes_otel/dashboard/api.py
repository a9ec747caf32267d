"""The Traces tab's read-only API: Hermes's dashboard loads this file by its path and mounts `router`.

From the installed package (a pip install: `hermes-otel enable` copies this folder to
`$HERMES_HOME/plugins/hermes_otel/dashboard/`), else from the package this folder sits in (the directory plugin,
`$HERMES_HOME/plugins/hermes_otel/`, whose package Hermes's dashboard process has not imported under this name).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path


def _package() -> None:
    try:
        importlib.import_module("hermes_otel")
    except ImportError:
        root = Path(__file__).resolve().parents[1]
        spec = importlib.util.spec_from_file_location("hermes_otel", root / "__init__.py",
                                                      submodule_search_locations=[str(root)])
        if spec is None or spec.loader is None:
            raise
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault("hermes_otel", module)  # our own package, under its own name
        spec.loader.exec_module(module)


_package()

from hermes_otel.tab.routes import router  # noqa: E402

__all__ = ["router"]
