"""Issue 17, item 7: the failure reporter never raises; a bad endpoint is one clear warning, not a traceback
per export; and the configuration refuses such an endpoint before any exporter sees it."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from hermes_otel import config, telemetry
from hermes_otel.config import OTLPTarget

BAD = "http://127.0.0.1:43180000"


def test_an_endpoint_with_a_port_out_of_range_is_one_warning_not_a_traceback_per_export(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    base = config.load_settings({"HERMES_HOME": str(tmp_path)}, Path(os.devnull)).settings
    target = OTLPTarget(BAD + "/v1/traces", "http/protobuf", {}, 1.0, "none")
    settings = dataclasses.replace(base, otlp={"traces": target}, file_signals=frozenset())
    live = telemetry.build(settings)
    tracer = live.tracer_provider.get_tracer("t")
    for _ in range(3):  # three exports
        with tracer.start_as_current_span("s"):
            pass
        live.tracer_provider.force_flush(2000)
    live.shutdown(2)
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.name, r.getMessage().split(" (")[0]) for r in loud] == [
        ("hermes_otel", f"hermes-otel: cannot export to {BAD}")
    ]
    assert "Traceback" not in caplog.text


def test_the_configuration_refuses_an_endpoint_with_a_port_out_of_range(tmp_path):
    result = config.load_settings({"HERMES_HOME": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": BAD}, Path(os.devnull))
    assert [str(p) for p in result.problems] == [
        "OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL with a host (and a port from 1 to 65535), "
        f"found '{BAD}'"
    ]
    assert result.settings.otlp == {}  # ignored: the embedded file default applies
    assert result.settings.file_signals == frozenset({"traces", "logs", "metrics"})
