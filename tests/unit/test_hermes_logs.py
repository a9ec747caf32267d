"""Hermes's own log lines → OTel log records (capture/logs.py), with explicit providers and in-memory exporters."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider

from hermes_otel.capture.logs import LOGGER_ATTR, HermesLogBridge, is_hermes, severity
from hermes_otel.emitter import Inline
from hermes_otel.redaction import masking
from hermes_otel.tracking import Tracker

SECRET = "sk-test-0123456789abcdefghijkl"


class Kept(logging.Handler):
    """Hermes's own handler (its agent.log), beside ours: what it formats must be untouched."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture(params=[True], ids=["capture on"])
def env(request):
    """A bridge with content captured (param True: what these tests check is how content is shown, masked and
    redacted); the `capture_off` tests run the default, capture off."""
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    exporter = InMemoryLogExporter()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    tracer = tracer_provider.get_tracer("t")
    tracker = Tracker(tracer, max_turns=8)
    content = request.param
    bridge = HermesLogBridge(lambda: (logger_provider.get_logger("hermes_otel.hermes_logs"), Inline(), tracker,
                                      content))
    kept = Kept()
    # The bridge sits on the root logger in the plugin; here on the test's Hermes-named loggers only.
    names = ("agent", "tools", "hermes_otel", "httpx")
    for name in names:
        logging.getLogger(name).addHandler(bridge)
        logging.getLogger(name).addHandler(kept)
        logging.getLogger(name).setLevel(logging.DEBUG)
    yield tracer, tracker, exporter, kept, bridge
    for name in names:
        logging.getLogger(name).removeHandler(bridge)
        logging.getLogger(name).removeHandler(kept)
        logging.getLogger(name).setLevel(logging.NOTSET)
    logger_provider.shutdown()
    tracer_provider.shutdown()


def records(exporter):
    return [d.log_record for d in exporter.get_finished_logs()]


def test_a_line_under_a_span_carries_its_ids_masked_and_hermes_sees_it_unchanged(env):
    tracer, _, exporter, kept, _ = env
    with tracer.start_as_current_span("chat fake-model") as span:
        logging.getLogger("agent.conversation_loop").warning("API call failed key=%s", SECRET)
    (record,) = records(exporter)
    context = span.get_span_context()
    assert (record.trace_id, record.span_id) == (context.trace_id, context.span_id)
    assert record.body == "API call failed key=<redacted>"
    assert (record.severity_number.value, record.severity_text) == (13, "WARNING")
    assert record.attributes[LOGGER_ATTR] == "agent.conversation_loop"
    assert record.attributes["code.function.name"] == (
        "test_a_line_under_a_span_carries_its_ids_masked_and_hermes_sees_it_unchanged")
    assert kept.lines == [f"API call failed key={SECRET}"]  # Hermes's own files are Hermes's business


def test_a_line_outside_any_span_joins_the_open_turn_of_its_session(env):
    _, tracker, exporter, _, _ = env
    turn = tracker.turn("s1:t:1", "s1", {})
    logger = logging.getLogger("agent.conversation_loop")
    for message, tag in (("tagged", " [s1]"), ("another session", " [s2]"), ("untagged", None)):
        # Set after the record is made: a loaded Hermes installs a record factory that sets session_tag itself.
        record = logger.makeRecord(logger.name, logging.WARNING, __file__, 0, message, (), None)
        if tag is not None:
            record.session_tag = tag
        elif hasattr(record, "session_tag"):
            del record.session_tag
        logger.handle(record)
    tagged, other, untagged = records(exporter)
    assert (tagged.trace_id, tagged.span_id) == (turn.span.get_span_context().trace_id,
                                                  turn.span.get_span_context().span_id)
    assert (other.trace_id, other.span_id) == (0, 0)
    assert (untagged.trace_id, untagged.span_id) == (0, 0)


def test_only_hermes_lines_at_the_level_and_an_exception_masked(env):
    _, _, exporter, _, bridge = env
    logging.getLogger("hermes_otel").warning("ours: never bridged")
    logging.getLogger("httpx").warning("a library's: not Hermes's")
    logging.getLogger("tools.terminal_tool").info("below WARNING")
    try:
        raise RuntimeError(f"tool failed with {SECRET}")
    except RuntimeError:
        logging.getLogger("tools.terminal_tool").exception("tool error")
    (record,) = records(exporter)
    assert record.body == "tool error"
    assert record.severity_text == "ERROR"
    assert record.attributes["exception.type"] == "RuntimeError"
    assert record.attributes["exception.message"] == "tool failed with <redacted>"
    assert SECRET not in record.attributes["exception.stacktrace"]
    assert "RuntimeError: tool failed with <redacted>" in record.attributes["exception.stacktrace"]
    bridge.setLevel(logging.INFO)
    logging.getLogger("tools.terminal_tool").info("now included")
    assert [r.body for r in records(exporter)][-1] == "now included"


def test_a_configured_secret_is_masked_and_a_failing_sink_is_silent(env):
    _, _, exporter, kept, bridge = env
    masking.remember("collector-header-value-42")
    logging.getLogger("agent").error("headers: collector-header-value-42")
    # Captured content knows the configuration's secrets as log masking does (one store): redacted as content.
    assert records(exporter)[-1].body == "headers: <redacted>"

    def broken():
        raise RuntimeError("sink down")

    bridge._sink = broken
    logging.getLogger("agent").error("still logged by Hermes")
    assert kept.lines[-1] == "still logged by Hermes"


def test_no_loop_when_emitting_logs_a_hermes_line(env):
    """A record logged while ours is being emitted (on the same thread) is not bridged again."""
    _, _, exporter, _, bridge = env
    sink = bridge._sink

    class Noisy:
        def emit(self, **kwargs):
            logging.getLogger("agent.noisy").warning("logged from inside emit")
            sink()[0].emit(**kwargs)

    bridge._sink = lambda: (Noisy(), Inline(), sink()[2], True)
    logging.getLogger("agent").warning("outer")
    assert [r.body for r in records(exporter)] == ["outer"]


def test_names_and_severities():
    assert [is_hermes(n) for n in ("agent", "agent.x", "tools.y", "run_agent", "hermes_otel", "agentx", "httpx")] == [
        True, True, True, True, False, False, False]
    assert [severity(level).name for level in (5, 10, 20, 30, 40, 50)] == [
        "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]


def test_install_puts_one_bridge_on_the_root_logger_and_follows_the_level():
    from hermes_otel.capture import logs

    root = logging.getLogger()
    before, installed = list(root.handlers), logs._bridge
    try:
        logs.install(lambda: None, "warning")
        logs.install(lambda: None, "error")  # a re-register: the same bridge, the new level
        bridges = [h for h in root.handlers if isinstance(h, HermesLogBridge)]
        assert len(bridges) == 1 and bridges[0].level == logging.ERROR
        root.removeHandler(bridges[0])  # someone reset the root logger's handlers
        logs.install(lambda: None, "off")
        assert [h for h in root.handlers if isinstance(h, HermesLogBridge)] == bridges
        assert bridges[0].level > logging.CRITICAL
    finally:
        root.handlers[:] = before
        logs._bridge = installed


@pytest.mark.parametrize("env", [False], ids=["capture off (default)"], indirect=True)
def test_capture_off_keys_hermes_hides_are_redacted_and_content_is_not_exported(env):
    """A refused workdir: Hermes logs the command (keys of Groq, Tavily, xAI, Replicate in it). Its agent.log
    line is Hermes's business; our record shows neither the keys nor, with capture off, the command."""
    _, _, exporter, kept, _ = env
    command = ("curl -H 'Authorization: gsk_abcdefghijklmnopqrstuvwxyz0123456789' tvly-ABCDEFGHIJKLMNOPQRSTUV01 "
               "xai-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL r8_abcdefghijklmnopqrstuvwxyz0123456789")
    logging.getLogger("tools.terminal_tool").warning("Blocked dangerous workdir: %s (command: %s)", "/tmp;rm", command)
    logging.getLogger("agent.conversation_loop").warning("API call failed (attempt %s/%s) error_type=%s summary=%s",
                                                          1, 3, "InternalServerError", "HTTP 500: search for jane doe")
    logging.getLogger("agent").warning(f"preformatted: {command}")  # what is content cannot be told: kept local
    url = "https://search.example/?q=jane+doe"
    try:
        raise RuntimeError(f"fetching {url} failed")  # the stack shows code (this line), not the value
    except RuntimeError:
        logging.getLogger("tools.web_tools").exception("tool %s failed", "web_search")
    blocked, failed, raised = records(exporter)
    assert blocked.body == "Blocked dangerous workdir: … (command: …)"
    assert failed.body == "API call failed (attempt 1/3) error_type=InternalServerError summary=…"
    assert raised.body == "tool web_search failed"
    assert raised.attributes["exception.type"] == "RuntimeError"
    assert "exception.message" not in raised.attributes
    assert raised.attributes["exception.stacktrace"].endswith("RuntimeError")
    assert "jane" not in repr([(r.body, dict(r.attributes)) for r in records(exporter)])
    assert len(kept.lines) == 4 and kept.lines[0].endswith(f"(command: {command})")  # Hermes's own log: as logged


def test_capture_on_keys_hermes_hides_are_redacted_by_hermes_own_redactor(env):
    _, _, exporter, _, _ = env
    keys = ("gsk_abcdefghijklmnopqrstuvwxyz0123456789", "tvly-ABCDEFGHIJKLMNOPQRSTUV01",
            "xai-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL", "r8_abcdefghijklmnopqrstuvwxyz0123456789")
    logging.getLogger("tools.terminal_tool").warning("Blocked dangerous workdir: %s (command: %s)", "/tmp;rm",
                                                     "curl " + " ".join(keys))
    (record,) = records(exporter)
    assert record.body.startswith("Blocked dangerous workdir: /tmp;rm (command: curl ")
    assert not any(key in record.body for key in keys), record.body
