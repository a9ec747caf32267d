"""A 10,000-turn outage through the real pipeline (tests/harness/spool_soak.py): the spool's size and age caps
hold, the oldest batches go first and are counted, and memory stays flat."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_a_10000_turn_outage_keeps_the_caps_and_flat_memory(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tests.harness.spool_soak", str(tmp_path), "10000"], cwd=ROOT,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    print(f"\n[soak] {report}")
    cap, largest = report["max_bytes"], report["largest_file"]
    assert report["disk_end"] <= cap  # the size cap holds
    assert report["disk_max"] <= cap + 3 * largest  # and never by more than one batch per signal being written
    assert report["old_left"] == []  # the batches eight days old were evicted (age cap)
    evicted = report["evicted"]
    assert evicted.get("traces/age") == 3
    assert evicted.get("traces/size", 0) > 0 and evicted.get("logs/size", 0) > 0  # oldest first, counted
    kept = sum(report["spooled"].values()) - sum(n for k, n in evicted.items() if not k.endswith("/age"))
    assert kept == len(list((tmp_path / "otel" / "spool").rglob("*.jsonl")))  # every write accounted for
    rss = {s["turn"]: s["rss_mb"] for s in report["rss"]}
    assert rss[10000] - rss[2000] < 10, rss  # flat: a leak of what was spooled would be tens of MB
    assert "cannot write to the spool" not in done.stderr
    assert done.stderr.count("is over its cap") == 1  # said once
