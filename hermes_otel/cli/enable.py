"""`hermes-otel enable` / `disable`: hermes_otel in (or out of) Hermes's plugin allow-list, on every supported Hermes.

`hermes plugins enable hermes_otel --no-allow-tool-override` is run, and what Hermes says is shown. Two cases edit
the allow-list with Hermes's own config functions instead (in a process of their own, so config.yaml is written
exactly as Hermes's enable writes it), and each says so:
- Hermes 0.16.0 and 0.17.0, whose enable command cannot see a plugin installed as a Python package (no such flag,
  and it lists only directory and bundled plugins, although their loader loads entry points in `plugins.enabled`);
- `--config-only`, asked for by name: on the 0.20+ line Hermes's enable admits the new plugin set through its
  package manager, which downloads a runtime. When that fails, nothing is changed and the user is told both ways.

Also: which telemetry this Hermes gets (`support()`), for `doctor`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .. import hermes_compat

PLUGIN = "hermes_otel"
SUPPORTED = ("0.16.0", "0.17.0", "0.18.2", "0.19.0")  # each tested by `make test-matrix` (0.2x: `make test-hermes2x`)
SUPPORTED_RANGE = hermes_compat.SUPPORTED_RANGE


def hermes_executable() -> str | None:
    """The `hermes` command of this environment, else the one on PATH."""
    candidate = Path(sys.executable).with_name("hermes")
    return str(candidate) if candidate.exists() else shutil.which("hermes")


def run(command: Sequence[str], env: Mapping[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """The one place hermes-otel starts a process: Hermes's own `hermes` command (enable, disable, the demo's chat),
    or this module on Hermes's config functions (:func:`_write`). Output captured, no input."""
    return subprocess.run(list(command), env=dict(env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def enable(env: Mapping[str, str] | None = None, out: TextIO | None = None, tab: bool = True,
           config_only: bool = False) -> int:
    """Enable the plugin, then install (or update) the dashboard's Traces tab (unless `tab` is false)."""
    code = _switch("enable", env, out or sys.stdout, config_only)
    if code == 0:
        _say_unseen_layers(env, out or sys.stdout)
    return _tab("enable", env, out or sys.stdout) if code == 0 and tab else code


def _say_unseen_layers(env: Mapping[str, str] | None, out: TextIO) -> None:
    """Where this Hermes would keep other plugins' layers out of our spans, say whose (doctor says it too)."""
    from ..config import hermes_home

    try:
        path = hermes_home(os.environ if env is None else env) / "config.yaml"
        config = hermes_compat.yaml_module().safe_load(path.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - unreadable: the line without the plugins' names
        config = None
    unseen = hermes_compat.unseen_layers(config if isinstance(config, dict) else None)
    if unseen:
        print(f"hermes-otel enable: on this Hermes, {unseen}", file=out)


def disable(env: Mapping[str, str] | None = None, out: TextIO | None = None, config_only: bool = False) -> int:
    """Disable the plugin, then remove the dashboard's Traces tab."""
    code = _switch("disable", env, out or sys.stdout, config_only)
    return _tab("disable", env, out or sys.stdout) if code == 0 else code


def _tab(action: str, env: Mapping[str, str] | None, out: TextIO) -> int:
    from ..config import hermes_home
    from ..tab import install

    home = hermes_home(os.environ if env is None else env)
    try:
        said = install.install(home) if action == "enable" else install.remove(home)
    except OSError as exc:
        print(f"hermes-otel {action}: the plugin is {action}d, but the dashboard's Traces tab could not be "
              f"{'installed in' if action == 'enable' else 'removed from'} {install.target(home)} "
              f"({exc.strerror or type(exc).__name__})", file=out)
        return 1
    if said:
        print(f"hermes-otel {action}: {said}", file=out)
    return 0


def _switch(action: str, env: Mapping[str, str] | None, out: TextIO, config_only: bool) -> int:
    env = dict(os.environ if env is None else env)
    hermes = hermes_executable()
    if hermes is None:
        print(f"hermes-otel {action}: the `hermes` command was not found in this environment", file=out)
        return 1
    command = [hermes, "plugins", action, PLUGIN] + (["--no-allow-tool-override"] if action == "enable" else [])
    shown = " ".join(["hermes", *command[1:]])
    if config_only:
        why = f"as asked (--config-only), `{shown}` not run"
    else:
        tried = run(command, env)
        lines = [line.strip() for line in (tried.stdout + tried.stderr).splitlines() if line.strip()] or ["no output"]
        if tried.returncode == 0:  # "✓ Plugin hermes_otel enabled. Takes effect on next session."
            print(f"hermes-otel {action}: ran `{shown}`: {lines[0]}", file=out)
            return 0
        installed = hermes_compat.distribution()
        if installed is None or hermes_compat.enable_sees_package_plugins(installed[1]):
            said = "\n".join(f"  {line}" for line in lines[-6:])  # the error ends the output
            print(f"hermes-otel {action}: `{shown}` failed; Hermes said:\n{said}\nNothing was changed. Run it again "
                  f"once Hermes can (on 0.20+ it admits the plugin set through its package manager, which downloads a "
                  f"runtime); or, with hermes-otel installed in this environment, `hermes-otel {action} --config-only` "
                  f"edits plugins.enabled / plugins.disabled in config.yaml with Hermes's own config functions, "
                  f"without the package manager", file=out)
            return 1
        why = f"Hermes {installed[1]}'s `plugins {action}` does not see a plugin installed as a Python package " \
              f"({lines[-1]})"
    written = run([sys.executable, "-m", __name__, "--write", action], env)
    try:
        result = json.loads(written.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        print(f"hermes-otel {action}: {why}, and editing the allow-list with Hermes's own config functions failed:"
              f"\n{(written.stdout + written.stderr).strip()[-2000:]}", file=out)
        return 1
    path = result["path"]
    if result["state"] != action + "d":
        print(f"hermes-otel {action}: {why}; editing the plugin lists of {path} did not take effect (Hermes reads "
              f"{PLUGIN} as {result['state']})", file=out)
        return 1
    if not result["changed"]:
        done = f"{PLUGIN} is already {action}d in {path}; nothing changed"
    elif action == "enable":
        done = f"added {PLUGIN} to plugins.enabled in {path} with Hermes's own config functions; takes effect on " \
               "the next session"
    else:
        done = f"moved {PLUGIN} from plugins.enabled to plugins.disabled in {path} with Hermes's own config " \
               "functions; takes effect on the next session"
    print(f"hermes-otel {action}: {why}; {done}", file=out)
    return 0


def _write(action: str) -> dict[str, object]:
    """In a process of its own: the allow-list edit of Hermes's `cmd_enable` / `cmd_disable`."""
    enabled, disabled = hermes_compat.plugin_sets()
    if action == "enable":
        changed = PLUGIN not in enabled or PLUGIN in disabled
        enabled.add(PLUGIN)
        disabled.discard(PLUGIN)
    else:
        changed = PLUGIN in enabled or PLUGIN not in disabled
        enabled.discard(PLUGIN)
        disabled.add(PLUGIN)
    if changed:
        hermes_compat.save_plugin_sets(enabled, disabled)
    enabled, disabled = hermes_compat.plugin_sets()
    state = "disabled" if PLUGIN in disabled or PLUGIN not in enabled else "enabled"
    return {"changed": changed, "path": hermes_compat.config_path(), "state": state}


# -- which telemetry this Hermes gets ------------------------------------------------


@dataclass(frozen=True)
class Support:
    ok: bool
    text: str


def support(version: str | None, distribution: str = "hermes-agent") -> Support:
    """What hermes-otel gives on the installed Hermes, in one line (for `doctor`)."""
    if version is None:
        return Support(False, "hermes-agent is not installed in this environment")
    if hermes_compat.public_surfaces():
        return Support(hermes_compat.known(version), f"{distribution} {version}: full telemetry through Hermes's "
                       "public plugin surfaces (a middleware of ours, a span per layer; nothing of Hermes rebound)")
    mode = ("full telemetry (middleware layers included)" if hermes_compat.runner_takes_callbacks() is not None
            else "hooks-only telemetry: turn, chat and tool spans from its observer hooks, every observer record; "
                 "no middleware layer spans (this Hermes has no middleware)")
    supported = hermes_compat.known(version)
    range_note = "" if supported else f" — untested: hermes-otel supports hermes-agent {SUPPORTED_RANGE}"
    return Support(supported, f"hermes-agent {version}: {mode}{range_note}")


if __name__ == "__main__":  # `python -m hermes_otel.cli.enable --write enable|disable` (see _switch)
    if len(sys.argv) == 3 and sys.argv[1] == "--write" and sys.argv[2] in ("enable", "disable"):
        print(json.dumps(_write(sys.argv[2])))
        raise SystemExit(0)
    raise SystemExit("usage: hermes-otel enable | hermes-otel disable")
