"""Issue 27, item 14: the command in collector/replay-files.yaml's comment, run as a user copies it, works beside
the documented single-node Collector: with that Collector's own ports (health_check 13133, telemetry 8888) taken,
the replay starts, reports healthy on its own port, and replays a traces file into an OTLP/gRPC intake."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess

import pytest

from hermes_otel.exporters.file.otlp_json import encode_spans_json
from tests.harness.backends import wait_until
from tests.harness.otelcol import COLLECTOR_DIR, OTELCOL, go_binary
from tests.harness.otlp_grpc_receiver import OTLPGrpcReceiver
from tests.unit.test_spool_store import spans


def _hold(port: int) -> socket.socket:
    """Take a loopback port as the single-node Collector would; skip when someone else has it."""
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", port))
    except OSError:
        held.close()
        pytest.skip(f"127.0.0.1:{port} is taken by another program on this machine")
    held.listen()
    return held


def test_the_replay_command_of_its_comment_runs_beside_the_single_node_collector(request, tmp_path):
    binary = go_binary(OTELCOL, request)
    comment = (COLLECTOR_DIR / "replay-files.yaml").read_text()
    (command,) = [line[1:].strip() for line in comment.splitlines() if line.startswith("#") and "otelcol-hermes" in line]
    words = shlex.split(command)
    env_words = [w for w in words if re.fullmatch(r"[A-Z_]+=.*", w)]
    assert [w.split("=")[0] for w in env_words] == ["HERMES_OTEL_DIR", "OTLP_TARGET"]
    otel = tmp_path / "otel"
    otel.mkdir()
    batch = spans(3)
    (otel / "traces.jsonl").write_text(json.dumps(encode_spans_json(batch)) + "\n")
    held = [_hold(13133), _hold(8888)]  # the single-node Collector's health_check and telemetry
    try:
        with OTLPGrpcReceiver() as intake:
            env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTELCOL_")},
                   "HERMES_OTEL_DIR": str(otel), "OTLP_TARGET": f"127.0.0.1:{intake.port}"}
            argv = [str(binary), *[w.replace("collector/", f"{COLLECTOR_DIR}/") for w in words[len(env_words) + 1:]]]
            log = tmp_path / "replay.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=COLLECTOR_DIR.parent)
            try:
                got = wait_until(lambda: (s := intake.spans()) and len(s) == 3 and s, 60, "the replayed spans", proc,
                                 log)
                assert proc.poll() is None, log.read_text()[-3000:]  # still running: it keeps tailing
                import urllib.request

                with urllib.request.urlopen("http://127.0.0.1:13134/", timeout=5) as health:
                    assert health.status == 200
            finally:
                proc.terminate()
                proc.wait(15)
    finally:
        for sock in held:
            sock.close()
    assert sorted(s.span_id for s in got) == sorted(f"{s.context.span_id:016x}" for s in batch)
