"""Install, remove and check the Traces tab in `$HERMES_HOME/plugins/hermes_otel/dashboard/`.

Hermes finds dashboard plugins only by directory (`plugins/*/dashboard/manifest.json`), never through entry
points. The directory plugin (`$HERMES_HOME/plugins/hermes_otel/`) ships its tab there already: the package's own
`dashboard/` folder. For a pip install, `hermes-otel enable` and the plugin's start-up copy that folder there (the
folder has no `plugin.yaml`, so Hermes's agent loader ignores it); its `api.py` imports the router of the installed
package, so the API always runs the package's code; the assets are copies, so `doctor` calls them stale when they
differ from the package's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..config.files import Unreadable, read_regular
from ..version import __version__

NAME = "hermes_otel"  # the key Hermes's plugins.enabled gates the tab by: the plugin's own name
ASSETS = Path(__file__).resolve().parents[1] / "dashboard"  # the package's own: the directory plugin's tab
FILES = ("manifest.json", "dist/index.js", "dist/style.css", "api.py")


def target(home: Path) -> Path:
    return home / "plugins" / NAME / "dashboard"


def _wanted() -> dict[str, bytes]:
    return {name: (ASSETS / name).read_bytes() for name in FILES}


def install(home: Path) -> str:
    """Write (or update) the tab's files; one line saying what was done."""
    directory = target(home)
    if directory.resolve() == ASSETS:
        return f"the dashboard's Traces tab is the directory plugin's own ({directory})"
    wanted = _wanted()
    if all(_read(directory / name) == data for name, data in wanted.items()):
        return f"the dashboard's Traces tab is up to date in {directory}"
    for name, data in wanted.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(data)
        temporary.replace(path)
    return f"installed the dashboard's Traces tab in {directory} (restart `hermes dashboard` to see it)"


def remove(home: Path) -> str | None:
    """Remove the tab's files (and its folders when nothing else is in them); a line, or None if none was there."""
    directory = target(home)
    if not directory.is_dir() or directory.is_symlink():
        return None
    if directory.resolve() == ASSETS:
        return None  # the directory plugin's own folder: removing the plugin removes it
    for name in FILES:
        (directory / name).unlink(missing_ok=True)
    shutil.rmtree(directory / "__pycache__", ignore_errors=True)
    for folder in (directory / "dist", directory, directory.parent):
        try:
            folder.rmdir()
        except OSError:  # not empty: someone else's files stay
            break
    return f"removed the dashboard's Traces tab from {directory}"


def status(home: Path) -> tuple[str, str]:
    """(`ok` | `warn` | `note`, one line) for `doctor`: installed, stale, missing or shadowed."""
    directory = target(home)
    winner = _first_manifest_named(home / "plugins", NAME)
    if winner is not None and winner != directory / "manifest.json":
        return "warn", (f"dashboard Traces tab shadowed: {winner} is also named {NAME!r} and Hermes loads that one; "
                        "remove it or rename its manifest")
    if not (directory / "manifest.json").exists():
        return "note", "dashboard Traces tab not installed (`hermes-otel enable` installs it)"
    wanted = _wanted()
    if all(_read(directory / name) == data for name, data in wanted.items()):
        return "ok", f"dashboard Traces tab installed ({directory})"
    installed = _manifest_version(directory / "manifest.json")
    return "warn", (f"dashboard Traces tab stale: {directory} holds version {installed}, this package is "
                    f"{__version__} (run `hermes-otel enable` to update it)")


# Other plugins' files (their manifests) and ours as installed: read as regular files only (a symbolic link is not
# followed, a FIFO does not block), of bounded size. Ours are a few KiB; a manifest is a small JSON document.
MAX_FILE_BYTES = 1 << 20


def _read(path: Path) -> bytes | None:
    try:
        return read_regular(path, MAX_FILE_BYTES, follow=False)
    except Unreadable:
        return None


def _manifest(path: Path) -> Any:
    data = _read(path)
    return json.loads(data) if data is not None else None


def _manifest_version(path: Path) -> str:
    try:
        version = _manifest(path).get("version")
    except (ValueError, AttributeError):
        return "unknown"
    return str(version) if version else "unknown"


def _first_manifest_named(root: Path, name: str) -> Path | None:
    """The manifest Hermes would pick for `name` among user plugins: the first in name order (as it scans)."""
    try:
        children = sorted(root.iterdir())
    except OSError:
        return None
    for child in children:
        manifest = child / "dashboard" / "manifest.json"
        try:
            data = _manifest(manifest) if child.is_dir() else None
        except ValueError:
            continue
        if (data.get("name", child.name) if isinstance(data, dict) else None) == name:
            return manifest
    return None
