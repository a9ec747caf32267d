"""Issue 27, items 5, 6, 7 and 12 (Ctrl-C): a spool that cannot be turned against its owner. Whatever sits under a
batch's name (a FIFO, a symbolic link, a file nobody can read) or in place of a signal directory is reported and
skipped, never waited on, followed or sent; one bad line costs that line, not the batch. The real CLI, real files,
a real loopback receiver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hermes_otel import config
from hermes_otel.cli import main as cli
from hermes_otel.exporters.file.otlp_json import encode_spans_json
from hermes_otel.exporters.spool.resend import send_all, targets_of
from hermes_otel.exporters.spool.store import Spool
from tests.harness.fault_servers import FaultServer
from tests.harness.otlp_receiver import OTLPReceiver
from tests.harness.signals import ctrl_c_as_typed
from tests.unit.test_hostile_config import within
from tests.unit.test_spool_store import spans

BATCH = "{ns:019d}-4242-{seq}-{key}.jsonl"


def _home(tmp_path: Path, monkeypatch, endpoint: str) -> tuple[Path, str]:
    """A HERMES_HOME whose configuration exports to `endpoint`; its traces spool folder and endpoint key."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", os.devnull)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")
    settings = config.load_settings().settings
    (key,) = [k for signal, k in targets_of(settings) if signal == "traces"]
    return settings.spool_directory, key


def _good_batch(spool_dir: Path, key: str, count: int = 3) -> list:
    batch = spans(count)
    Spool(spool_dir, 1 << 20, 86400).put("traces", key, [encode_spans_json(batch)])
    return batch


def _name(key: str, seq: int = 1) -> str:
    return BATCH.format(ns=time.time_ns() - 10**9, seq=seq, key=key)


def _cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = within(10, lambda: cli.main(args))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- item 5: a FIFO, a symbolic link or an unreadable file named like a batch ----------------------------------


def test_a_fifo_named_like_a_batch_is_skipped_by_send_and_removed_by_drop(tmp_path, monkeypatch, capsys):
    with OTLPReceiver() as receiver:
        spool_dir, key = _home(tmp_path, monkeypatch, receiver.endpoint)
        batch = _good_batch(spool_dir, key)
        fifo = spool_dir / "traces" / _name(key, 7)
        os.mkfifo(fifo, 0o600)
        code, out, err = _cli(["spool", "send"], capsys)
        assert len(receiver.wait_for_spans(lambda s: len(s) == len(batch), timeout=5)) == len(batch)
    assert f"hermes-otel spool: skipped {fifo}: a FIFO, not a regular file (`hermes-otel spool drop` removes it)" \
        in err.splitlines()
    assert out.splitlines()[-1] == ("hermes-otel spool: sent 1 batch (3 spans, log records and metric points); "
                                    "1 skipped: not a batch")
    assert code == 1
    from hermes_otel.cli.spool import doctor_lines

    assert ("warn", f"spool: skipped {fifo}: a FIFO, not a regular file (`hermes-otel spool drop` removes it)") \
        in doctor_lines(config.load_settings().settings)
    code, out, err = _cli(["spool", "drop", "--yes"], capsys)
    assert code == 0 and out == "hermes-otel spool: deleted 1 entry that was not a batch\n"
    assert not os.path.lexists(fifo)


def test_a_symbolic_link_named_like_a_batch_is_never_followed_and_drop_removes_the_link_only(
        tmp_path, monkeypatch, capsys):
    target = tmp_path / "precious.jsonl"
    target.write_text(json.dumps(encode_spans_json(spans(2))) + "\n")
    with OTLPReceiver() as receiver:
        spool_dir, key = _home(tmp_path, monkeypatch, receiver.endpoint)
        _good_batch(spool_dir, key, 1)  # makes the folders
        link = spool_dir / "traces" / _name(key, 9)
        link.symlink_to(target)
        code, out, err = _cli(["spool", "send"], capsys)
        time.sleep(0.2)
        assert len(receiver.spans()) == 1  # the real batch only, never the target
    assert f"hermes-otel spool: skipped {link}: a symbolic link, not followed (`hermes-otel spool drop` removes it)" \
        in err.splitlines()
    assert "being sent by another process" not in out + err
    code, out, err = _cli(["spool", "drop", "--yes"], capsys)
    assert code == 0 and out == "hermes-otel spool: deleted 1 entry that was not a batch\n"
    assert not os.path.lexists(link) and target.exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file")
def test_a_batch_nobody_can_read_is_reported_not_called_busy_and_can_be_dropped(tmp_path, monkeypatch, capsys):
    with OTLPReceiver() as receiver:
        spool_dir, key = _home(tmp_path, monkeypatch, receiver.endpoint)
        _good_batch(spool_dir, key)
        (entry,) = list((spool_dir / "traces").iterdir())
        entry.chmod(0)
        code, out, err = _cli(["spool", "send"], capsys)
    assert f"hermes-otel spool: skipped {entry}: permission denied (`hermes-otel spool drop` removes it)" \
        in err.splitlines()
    assert "another process" not in out + err
    code, out, _ = _cli(["spool", "drop", "--yes"], capsys)
    assert code == 0 and not entry.exists()


def test_a_batch_swapped_for_a_fifo_after_the_listing_is_reported_not_waited_on_nor_called_busy(tmp_path):
    """The listing saw a regular file; by the time it is opened it is a FIFO (a race, or a hostile user of the same
    uid): the open does not wait for a writer, the open file is checked, and it is a stray, never "busy"."""
    from hermes_otel.config import OTLPTarget
    from hermes_otel.exporters.spool.resend import Exporters, send_entry
    from hermes_otel.exporters.spool.store import endpoint_key

    spool = Spool(tmp_path / "spool", 1 << 20, 86400)
    url = "http://127.0.0.1:9/v1/traces"
    spool.put("traces", endpoint_key("http/protobuf", url), [encode_spans_json(spans(1))])
    (entry,) = spool.entries()
    entry.path.unlink()
    os.mkfifo(entry.path, 0o600)
    outcome = within(5, lambda: send_entry(spool, entry, OTLPTarget(url, "http/protobuf", {}, 1.0, "none"),
                                           Exporters()))
    assert (outcome.kind, outcome.detail) == ("stray", "a FIFO, not a regular file")
    assert within(5, lambda: spool.evict(entry, "age")) is False and os.path.lexists(entry.path)


# -- item 6: a signal directory that is a symbolic link ------------------------------------------------------------


def test_a_signal_directory_that_is_a_symbolic_link_is_refused_and_nothing_in_its_target_is_touched(
        tmp_path, monkeypatch, capsys):
    with OTLPReceiver() as receiver:
        spool_dir, key = _home(tmp_path, monkeypatch, receiver.endpoint)
        _good_batch(spool_dir, key)
        elsewhere = tmp_path / "elsewhere"
        (spool_dir / "traces").rename(elsewhere)  # a batch with a matching name now sits in the target
        (spool_dir / "traces").symlink_to(elsewhere)
        code, out, err = _cli(["spool", "send"], capsys)
        time.sleep(0.2)
        assert receiver.spans() == []
    assert len(list(elsewhere.iterdir())) == 1  # neither sent nor deleted
    assert (f"hermes-otel spool: not reading {spool_dir / 'traces'}: it is a symbolic link (to {elsewhere}); "
            "hermes-otel does not follow it") in err.splitlines()
    code, out, err = _cli(["spool", "drop", "--yes"], capsys)
    assert len(list(elsewhere.iterdir())) == 1


# -- item 7: one bad line costs that line ------------------------------------------------------------------------------


def test_a_line_with_a_non_hex_trace_id_is_skipped_and_counted_and_the_rest_is_sent(tmp_path, monkeypatch, capsys):
    with OTLPReceiver() as receiver:
        spool_dir, key = _home(tmp_path, monkeypatch, receiver.endpoint)
        good, bad = encode_spans_json(spans(3)), encode_spans_json(spans(2))
        bad["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "not-hex-at-all"
        Spool(spool_dir, 1 << 20, 86400).put("traces", key, [bad, good])
        code, out, err = _cli(["spool", "send"], capsys)
        got = receiver.wait_for_spans(lambda s: len(s) == 3, timeout=5)
    assert sorted(s.name for s in got) == sorted(s["name"] for s in good["resourceSpans"][0]["scopeSpans"][0]["spans"])
    assert code == 0
    assert out.splitlines()[-1] == ("hermes-otel spool: sent 1 batch (3 spans, log records and metric points); "
                                    "1 unreadable line skipped")


def test_a_spool_api_send_counts_the_bad_lines(tmp_path):
    with OTLPReceiver() as receiver:
        url = f"{receiver.endpoint}/v1/traces"
        from hermes_otel.config import OTLPTarget
        from hermes_otel.exporters.spool.store import endpoint_key

        spool = Spool(tmp_path / "spool", 1 << 20, 86400)
        good, bad = encode_spans_json(spans(3)), encode_spans_json(spans(2))
        bad["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"] = "zz"
        spool.put("traces", endpoint_key("http/protobuf", url), [good, bad, good])
        target = OTLPTarget(url, "http/protobuf", {}, 2.0, "none")
        report = send_all(spool, {("traces", endpoint_key("http/protobuf", url)): target})
        assert (report.sent, report.items, report.bad_lines) == (1, 6, 1)
        assert len(receiver.wait_for_spans(lambda s: len(s) == 6, timeout=5)) == 6


# -- item 12: Ctrl-C during `spool send` ----------------------------------------------------------------------------


def test_ctrl_c_during_spool_send_exits_130_without_a_traceback(tmp_path):
    with FaultServer("blackhole") as server:
        env = {**os.environ, "HERMES_HOME": str(tmp_path / "home"), "HERMES_OTEL_PLUGINS_TOML": os.devnull,
               "OTEL_EXPORTER_OTLP_ENDPOINT": server.endpoint, "OTEL_EXPORTER_OTLP_TIMEOUT": "60000",
               "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        settings = config.load_settings(env).settings
        (key,) = [k for signal, k in targets_of(settings) if signal == "traces"]
        _good_batch(settings.spool_directory, key)
        proc = subprocess.Popen([sys.executable, "-m", "hermes_otel.cli.main", "spool", "send"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_typed)
        assert proc.stdout.readline().startswith("sending 1 spooled batch")
        deadline = time.monotonic() + 10
        while server.count() == 0 and time.monotonic() < deadline:  # the request is in flight
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert "Traceback" not in err and err == "hermes-otel: interrupted\n"


# -- issue 27, "also decide": a changed tenant key never receives the batches spooled for the old one -------------


def _spool_through_a_dead_endpoint(tmp_path: Path, monkeypatch, headers: str) -> config.Settings:
    """The real pipeline exports one span to an endpoint that refuses connections: the batch is spooled."""
    from tests.harness.fault_servers import refused_endpoint
    from tests.unit.test_secrets_in_logs import _export_once

    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HERMES_OTEL_PLUGINS_TOML", os.devnull)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{refused_endpoint()}/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", headers)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
    settings = config.load_settings().settings
    _export_once(settings, "tenant-a's span")
    assert len(Spool(settings.spool_directory, 1 << 20, 86400).entries("traces")) == 1
    return settings


def _as_now(settings: config.Settings, endpoint: str, headers: dict[str, str]) -> dict:
    import dataclasses

    target = dataclasses.replace(settings.otlp["traces"], endpoint=f"{endpoint}/v1/traces", headers=headers)
    return targets_of(dataclasses.replace(settings, otlp={"traces": target}))


def test_a_changed_tenant_key_never_receives_the_batches_spooled_for_the_old_one(tmp_path, monkeypatch):
    settings = _spool_through_a_dead_endpoint(tmp_path, monkeypatch, "x-scope-orgid=tenant-a")
    spool = Spool(settings.spool_directory, 1 << 20, 86400)
    endpoint = settings.otlp["traces"].endpoint.rsplit("/v1/", 1)[0]
    with OTLPReceiver(port=int(endpoint.rsplit(":", 1)[1])) as receiver:  # the collector is back, same URL
        report = send_all(spool, _as_now(settings, endpoint, {"x-scope-orgid": "tenant-b"}))  # another tenant now
        assert (report.sent, report.no_target) == (0, 1) and receiver.spans() == []
        report = send_all(spool, _as_now(settings, endpoint, {"x-scope-orgid": "tenant-a"}))
        assert report.sent == 1
        got = receiver.wait_for_spans(lambda s: len(s) == 1, timeout=5)
    assert [s.name for s in got] == ["tenant-a's span"] and receiver.headers[-1]["x-scope-orgid"] == "tenant-a"


def test_an_endpoint_without_headers_keeps_its_spool_key():
    from hermes_otel.exporters.spool.store import endpoint_key

    assert endpoint_key("http/protobuf", "http://c:4318/v1/traces") == endpoint_key("http/protobuf",
                                                                                    "http://c:4318/v1/traces", {})
    assert endpoint_key("http/protobuf", "http://c:4318/v1/traces", {"x-scope-orgid": "a"}) != endpoint_key(
        "http/protobuf", "http://c:4318/v1/traces", {"x-scope-orgid": "b"})


# -- issue 27, "also decide": a re-send's memory is bounded by the batch size limit -------------------------------


def test_a_large_batch_is_re_sent_in_requests_of_at_most_the_batch_size_limit(tmp_path):
    """A spool file of 2,100 spans in 5 lines (requests of 420) goes as requests of at most 512 spans and more
    (a request is never split): 840, 840, 420 — the re-send holds one of them at a time, never the whole file."""
    from hermes_otel.config import OTLPTarget
    from hermes_otel.exporters.spool.decode import PIECE_ITEMS
    from hermes_otel.exporters.spool.store import endpoint_key

    assert PIECE_ITEMS == 512
    with OTLPReceiver() as receiver:
        url = f"{receiver.endpoint}/v1/traces"
        spool = Spool(tmp_path / "spool", 1 << 30, 86400)
        batch = spans(2100)
        spool.put("traces", endpoint_key("http/protobuf", url),
                  [encode_spans_json(batch[i:i + 420]) for i in range(0, 2100, 420)])
        target = OTLPTarget(url, "http/protobuf", {}, 5.0, "none")
        report = send_all(spool, {("traces", endpoint_key("http/protobuf", url)): target})
        got = receiver.wait_for_spans(lambda s: len(s) == 2100, timeout=10)
        assert (report.sent, report.items, receiver.request_count) == (1, 2100, 3)
    assert sorted(s.span_id for s in got) == sorted(f"{s.context.span_id:016x}" for s in batch)
    assert spool.entries() == []
