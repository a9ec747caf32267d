"""Issue 17, item 3: files are written only where they are ours. A directory or file that another user owns (or
planted), or a symbolic link, is refused with one message and no file is written; `doctor` says the same.
Real files and owners: the suite runs as root here, so another user's files are made with chown; elsewhere the
tests that need that are skipped."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from hermes_otel import config, telemetry
from hermes_otel.cli import main as cli
from hermes_otel.exporters.relay import atof

OTHER = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")


def _run(tmp_path: Path, directory: Path, every_signal: bool = False) -> None:
    """A span (and with `every_signal` a log record and a metric point too) through the real pipeline."""
    from opentelemetry._logs import LogRecord

    toml = tmp_path / "plugins.toml"
    toml.write_text('version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'
                    f'file = {{ enabled = true, directory = "{directory}" }}\n')
    settings = config.load_settings({"HERMES_HOME": str(tmp_path / "home")}, toml).settings
    live = telemetry.build(settings)
    with live.tracer_provider.get_tracer("t").start_as_current_span("s"):
        if every_signal:
            live.logger_provider.get_logger("t").emit(LogRecord(body="b", event_name="e"))
    if every_signal:
        live.meter_provider.get_meter("t").create_counter("c").add(1)
        live.force_flush(3)
    live.shutdown(3)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _planted(directory: Path, mode: int = 0o777) -> Path:
    directory.mkdir()
    directory.chmod(mode)
    os.chown(directory, OTHER, OTHER)
    planted = directory / "traces.jsonl"
    planted.write_text("")
    planted.chmod(0o666)
    os.chown(planted, OTHER, OTHER)
    return planted


@as_root
def test_a_directory_owned_by_another_user_is_refused_once(tmp_path, caplog, monkeypatch, capsys):
    caplog.set_level(logging.DEBUG)
    shared = tmp_path / "shared"
    planted = _planted(shared)
    _run(tmp_path, shared)
    assert planted.read_text() == "" and sorted(p.name for p in shared.iterdir()) == ["traces.jsonl"]
    assert stat_mode(shared) == 0o777  # not ours: left as it is
    assert _warnings(caplog) == [
        f"hermes-otel: not writing telemetry files to {shared}: it is owned by uid {OTHER}, not by this user (uid 0); "
        "no files are written there (set file.directory to a directory of your own; see `hermes-otel config keys`)"
    ]
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(tmp_path / "plugins.toml"))
    assert cli.main(["doctor"]) == 1
    assert (f"FAIL  file export directory {shared} is owned by uid {OTHER}, not by this user (uid 0): no telemetry "
            "files will be written") in capsys.readouterr().out


def _planted_in_ours(tmp_path: Path) -> tuple[Path, Path]:
    """A directory of ours holding a traces.jsonl another user planted (world-writable)."""
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    planted = ours / "traces.jsonl"
    planted.write_text("")
    planted.chmod(0o666)
    os.chown(planted, OTHER, OTHER)
    return ours, planted


@as_root
def test_a_file_another_user_planted_in_our_directory_is_refused(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    ours, planted = _planted_in_ours(tmp_path)
    _run(tmp_path, ours)
    assert planted.read_text() == ""  # the other user reads nothing of ours
    assert [w.split(": ", 2)[2] for w in _warnings(caplog)] == [
        f"traces.jsonl is owned by uid {OTHER}, not by this user (uid 0); no files are written there (set "
        "file.directory to a directory of your own; see `hermes-otel config keys`)"
    ]


def test_an_otel_symlink_is_not_followed_into_a_place_we_chmod(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    link = tmp_path / "otel"
    link.symlink_to(elsewhere)
    _run(tmp_path, link)
    assert stat_mode(elsewhere) == 0o755 and list(elsewhere.iterdir()) == []
    assert _warnings(caplog) == [
        f"hermes-otel: not writing telemetry files to {link}: it is a symbolic link (to {elsewhere}), not followed; "
        "no files are written there (set file.directory to a directory of your own; see `hermes-otel config keys`)"
    ]


def test_a_symlinked_file_is_not_followed(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    ours = tmp_path / "ours"
    ours.mkdir(mode=0o700)
    target = tmp_path / "target.txt"
    target.write_text("keep\n")
    (ours / "traces.jsonl").symlink_to(target)
    _run(tmp_path, ours)
    assert target.read_text() == "keep\n"
    # said by its own open, or by a sibling's (the providers flush side by side): either way named and not followed
    assert any("traces.jsonl is a symbolic link" in w and "not follow" in w for w in _warnings(caplog))


def test_our_own_loose_directory_is_still_tightened_and_used(tmp_path):
    ours = tmp_path / "loose"
    ours.mkdir()
    ours.chmod(0o777)
    _run(tmp_path, ours)
    assert stat_mode(ours) == 0o700
    line = json.loads((ours / "traces.jsonl").read_text().splitlines()[0])
    assert line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] == "s"


@as_root
def test_an_atof_file_sink_in_another_users_directory_is_not_started(tmp_path):
    shared = tmp_path / "shared"
    _planted(shared)
    with pytest.raises(PermissionError, match=f"owned by uid {OTHER}"):
        atof.FileSink(atof.FileSinkConfig(output_directory=str(shared), filename="traces.jsonl", mode="overwrite"))
    assert (shared / "traces.jsonl").stat().st_uid == OTHER


def test_doctor_sees_a_directory_under_a_regular_file(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    toml = tmp_path / "plugins.toml"
    toml.write_text(f'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'
                    f'file = {{ directory = "{blocker / "otel"}" }}\n')
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", str(toml))
    assert cli.main(["doctor"]) == 1
    assert (f"FAIL  file export directory {blocker / 'otel'} cannot be created: {blocker} is not a directory: no "
            "telemetry files will be written") in capsys.readouterr().out


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@as_root
def test_a_foreign_traces_file_refuses_the_logs_and_metrics_files_of_that_directory_too(tmp_path, caplog):
    """Issue 27, item 13: "no files are written there" holds for every signal, not only the refused file's."""
    caplog.set_level(logging.DEBUG)
    ours, planted = _planted_in_ours(tmp_path)
    _run(tmp_path, ours, every_signal=True)
    assert sorted(p.name for p in ours.iterdir()) == ["traces.jsonl"] and planted.read_text() == ""
    assert len([w for w in _warnings(caplog) if "not writing telemetry files" in w]) == 1
