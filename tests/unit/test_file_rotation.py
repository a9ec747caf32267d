"""Rotation of the OTLP-JSON files under real concurrency and real disk faults.

Each test reproduces a loss of the previous writer (issue 16): processes rotating over each other, a cost
per rotation that grew with `backups`, and a full disk whose torn line swallowed the next record.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_otel.exporters.file.exporter import RotatingJsonLinesWriter

ROOT = Path(__file__).resolve().parents[2]
PROCESSES, WRITES = 8, 300


def _records(directory: Path) -> tuple[list[dict], int]:
    """Every readable line of every telemetry file in `directory` (not the hidden lock file), and the bad ones."""
    records, bad = [], 0
    for path in directory.iterdir():
        if path.name.startswith("."):
            continue
        for line in path.read_bytes().split(b"\n"):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError:
                    bad += 1
    return records, bad


_WRITER = """
import os, sys, time
from pathlib import Path
from hermes_otel.exporters.file.exporter import RotatingJsonLinesWriter
path, me, writes, start = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
writer = RotatingJsonLinesWriter(path, max_bytes=4096, backups=1000)
while time.time() < start:  # all processes begin together
    time.sleep(0.001)
for i in range(writes):
    writer.write({"p": me, "i": i, "pad": "x" * 60})
"""


def test_processes_rotating_the_same_file_lose_nothing(tmp_path: Path) -> None:
    """8 real processes append 300 records each to one file that rotates every ~40 records."""
    import time

    path = tmp_path / "traces.jsonl"
    start = time.time() + 1.5
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(p), str(WRITES), str(start)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in range(PROCESSES)
    ]
    outcomes = [(proc.wait(120), proc.stderr.read()) for proc in procs]
    for proc in procs:
        proc.stdout.close()
        proc.stderr.close()
    assert [code for code, _ in outcomes] == [0] * PROCESSES, [err[-800:] for _, err in outcomes]
    records, bad = _records(tmp_path)
    assert bad == 0
    keys = sorted((r["p"], r["i"]) for r in records)
    assert keys == sorted((p, i) for p in range(PROCESSES) for i in range(WRITES))  # each exactly once
    assert len(list(tmp_path.glob("traces.jsonl.*"))) > 20  # it really rotated, many times


@contextlib.contextmanager
def _counting_file_operations():
    """Count the renames, removals and directory listings made inside the block (audit events: real calls)."""
    counts = {"os.rename": 0, "os.remove": 0, "os.listdir": 0, "os.scandir": 0}
    state = {"on": True}

    def hook(event: str, args: tuple) -> None:
        if state["on"] and event in counts:
            counts[event] += 1

    sys.addaudithook(hook)  # cannot be removed: switched off after the block
    try:
        yield counts
    finally:
        state["on"] = False


@pytest.mark.parametrize("backups", [3, 1000])
def test_a_rotation_costs_the_same_whatever_the_number_of_backups(tmp_path: Path, backups: int) -> None:
    path = tmp_path / "traces.jsonl"
    writer = RotatingJsonLinesWriter(path, max_bytes=1024, backups=backups)
    for n in range(1, backups + 1):  # a directory already holding `backups` rotated files
        (tmp_path / f"traces.jsonl.{n}").write_text('{"old":1}\n')
    line = {"pad": "x" * 200}  # ~212 bytes: a rotation every 5th write
    for _ in range(10):  # the first rotations (which may look around once)
        writer.write(line)
    with _counting_file_operations() as counts:
        for _ in range(100):
            writer.write(line)
    writer.close()
    rotations = 25  # 4 lines of 211 bytes fit in 1024: one rotation every 4 writes
    assert counts["os.listdir"] + counts["os.scandir"] == 0
    assert counts["os.rename"] == rotations  # the full file becomes the newest backup
    assert counts["os.remove"] <= rotations  # and the one `backups` generations older goes
    assert len(list(tmp_path.glob("traces.jsonl.*"))) == backups


_FULL_DISK = """
import json, os, resource, sys
from pathlib import Path
from hermes_otel.exporters.file.exporter import RotatingJsonLinesWriter
path = Path(sys.argv[1])
writer = RotatingJsonLinesWriter(path, max_bytes=1 << 20, backups=1)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, hard))  # the disk is full at 1000 bytes
written = 0
for i in range(100):
    try:
        writer.write({"i": i, "pad": "x" * 50})
        written += 1
    except OSError as exc:
        failed = i
        break
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space is back
writer.write({"after": 1})
writer.write({"after": 2})
print(json.dumps({"written": written, "failed": failed}))
"""


def test_a_full_disk_costs_only_the_record_that_failed(tmp_path: Path) -> None:
    """A real write limit (RLIMIT_FSIZE): the failed record is torn; the first one after recovery is whole."""
    path = tmp_path / "traces.jsonl"
    done = subprocess.run([sys.executable, "-c", _FULL_DISK, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    records, bad = _records(tmp_path)
    assert result["written"] >= 10
    assert bad == 1  # the torn line of the record that failed, and nothing else
    assert records == [{"i": i, "pad": "x" * 50} for i in range(result["written"])] + [{"after": 1}, {"after": 2}]


@pytest.fixture
def tiny_tmpfs(tmp_path: Path):
    """A real 64 KiB tmpfs (root only: mounting needs it); skipped elsewhere, the RLIMIT test covers that case."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root (test_a_full_disk_costs_only_the_record_that_failed covers it)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_full_tmpfs_costs_only_the_record_that_failed(tiny_tmpfs: Path) -> None:
    directory = tiny_tmpfs / "otel"
    directory.mkdir(mode=0o700)
    filler = tiny_tmpfs / "filler"
    writer = RotatingJsonLinesWriter(directory / "traces.jsonl", max_bytes=1 << 20, backups=1)
    with filler.open("wb") as handle:  # leave a few KiB free
        with contextlib.suppress(OSError):
            handle.write(b"f" * (56 * 1024))
    written = 0
    with pytest.raises(OSError):
        for i in range(10_000):
            writer.write({"i": i, "pad": "y" * 300})
            written += 1
    filler.unlink()  # space is back
    writer.write({"after": 1})
    writer.close()
    records, bad = _records(directory)
    assert written > 0 and bad <= 1  # at most the torn line of the failed record
    assert records == [{"i": i, "pad": "y" * 300} for i in range(written)] + [{"after": 1}]


def test_the_lock_file_keeps_the_collectors_glob_and_the_viewer_clean(tmp_path: Path) -> None:
    writer = RotatingJsonLinesWriter(tmp_path / "traces.jsonl", max_bytes=1024, backups=2)
    for _ in range(20):
        writer.write({"pad": "x" * 200})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert ".traces.jsonl.lock" in names  # hidden: `traces.jsonl*` (the replay config's glob) does not match it
    assert [n for n in names if n.startswith("traces.jsonl")] == sorted(
        ["traces.jsonl", "traces.jsonl.3", "traces.jsonl.4"])  # 4 rotations (4 lines a file), 2 kept
    assert os.stat(tmp_path / ".traces.jsonl.lock").st_mode & 0o777 == 0o600
