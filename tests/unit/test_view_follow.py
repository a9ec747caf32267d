"""Issue 26, item 5: `hermes-otel view --follow`: each turn's waterfall as it ends, across file rotation, until
Ctrl-C (exit 130, no traceback). Files are written by the real file exporter (with a small rotation size)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import set_span_in_context

from hermes_otel.exporters.file.exporter import JsonFileSpanExporter, RotatingJsonLinesWriter, file_paths
from hermes_otel.local.follow import Follower
from tests.harness.signals import ctrl_c_as_typed

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def exporter(directory, max_bytes=20 * 1024 * 1024):
    writer = RotatingJsonLinesWriter(file_paths(directory)["traces"], max_bytes, 3)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonFileSpanExporter(writer)))
    return provider, writer


def turn_parts(tracer, n: int):
    """A turn's root (open) and its two children (ended, so written): end the root to finish the turn."""
    start = T0 + n * 1000 * MS
    root = tracer.start_span(f"invoke_agent turn{n}", start_time=start)
    inside = set_span_in_context(root)
    for k in range(2):
        child = tracer.start_span(f"chat {n}.{k} " + "x" * 300, context=inside, start_time=start + k * MS)
        child.end(start + (k + 1) * MS)
    return root, start


def test_each_turn_once_its_root_is_written_across_rotation(tmp_path):
    provider, writer = exporter(tmp_path, max_bytes=2048)  # a turn's lines rotate the file
    tracer = provider.get_tracer("t")
    old, start = turn_parts(tracer, 0)
    old.end(start + 5 * MS)  # before the follower started: not shown
    follower = Follower(tmp_path)
    assert follower.poll() == []
    shown = []
    for n in range(1, 6):
        root, start = turn_parts(tracer, n)
        shown += follower.poll()  # the children are written, the turn is not finished: nothing yet
        assert [t.name for t in shown] == [f"invoke_agent turn{m}" for m in range(1, n)]
        root.end(start + 5 * MS)
        shown += follower.poll()
        assert [t.name for t in shown] == [f"invoke_agent turn{m}" for m in range(1, n + 1)]
        assert len(shown[-1].spans) == 3
    assert sorted(p.name for p in tmp_path.glob("traces.jsonl.*"))  # it did rotate, more than once
    assert follower.bad_lines == 0
    follower.close()
    provider.shutdown()
    writer.close()


def test_a_file_that_appears_later_is_followed_from_its_start(tmp_path):
    follower = Follower(tmp_path)
    assert follower.poll() == []
    provider, writer = exporter(tmp_path)
    root, start = turn_parts(provider.get_tracer("t"), 1)
    root.end(start + 5 * MS)
    assert [t.name for t in follower.poll()] == ["invoke_agent turn1"]
    (tmp_path / "traces.jsonl").open("ab").write(b"not json\n")
    assert follower.poll() == [] and follower.bad_lines == 1
    follower.close()
    provider.shutdown()
    writer.close()


def test_the_command_prints_each_turn_and_ctrl_c_ends_it_without_a_traceback(tmp_path):
    provider, writer = exporter(tmp_path)
    code = "import sys; from hermes_otel.cli.main import main; sys.exit(main(sys.argv[1:]))"
    process = subprocess.Popen([sys.executable, "-c", code, "view", "--follow", "--ascii", "--width", "80",
                                str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=ctrl_c_as_typed,
                               env={**os.environ, "HERMES_HOME": str(tmp_path)})
    try:
        assert process.stderr is not None and process.stdout is not None
        said = process.stderr.readline()
        assert said == (f"hermes-otel view: following {tmp_path / 'traces.jsonl'}; each turn is shown as it ends "
                        "(Ctrl-C to stop)\n")
        root, start = turn_parts(provider.get_tracer("t"), 7)
        root.end(start + 5 * MS)
        header = process.stdout.readline()
        assert header.startswith("trace ") and "invoke_agent turn7" in header and header.endswith("3 spans\n")
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert err == "" and "Traceback" not in out
    provider.shutdown()
    writer.close()


def test_follow_refuses_a_fifo(tmp_path, capsys):
    from hermes_otel.cli import main as cli

    fifo = tmp_path / "traces.jsonl"
    os.mkfifo(fifo)
    assert cli.main(["view", "--follow", str(fifo)]) == 1
    assert capsys.readouterr().err == f"hermes-otel view: cannot read {fifo} (not a regular file)\n"
