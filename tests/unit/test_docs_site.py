"""`make docs` builds the site with mkdocs --strict: no warnings, every page in the navigation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_site_builds_strict_without_warnings(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    assert "WARNING" not in build.stdout + build.stderr
    for page in ("quickstart", "configuration", "telemetry", "middleware", "backends", "scaling", "troubleshooting",
                 "hermes-observability"):
        assert (tmp_path / "site" / page / "index.html").exists(), page


def test_every_page_is_in_the_navigation():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    listed = {next(iter(entry.values())) for entry in nav}
    assert listed == {p.name for p in (ROOT / "docs").glob("*.md")}
