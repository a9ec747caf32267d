"""Issue 26, item 4: the local record stays on beside an OTLP endpoint (the traces file `view`, `cost` and the
dashboard's Traces tab read), bounded by rotation; `file.enabled = false` turns every file off."""

from __future__ import annotations

import pytest

from hermes_otel.config import load_settings

OURS = 'version = 1\n[[components]]\nkind = "hermes_otel"\n[components.config]\n'


@pytest.mark.parametrize(("env", "document", "signals"), [
    ({}, "", {"traces", "logs", "metrics"}),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "", {"traces"}),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, "", {"traces", "logs", "metrics"}),
    ({"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://127.0.0.1:4318/v1/logs"}, "", {"traces", "metrics"}),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "file = { enabled = false }\n", set()),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "file = { enabled = true }\n",
     {"traces", "logs", "metrics"}),
])
def test_the_traces_file_stays_on_beside_an_endpoint(tmp_path, env, document, signals):
    path = None
    if document:
        path = tmp_path / "plugins.toml"
        path.write_text(OURS + document)
        path.chmod(0o600)
    result = load_settings({"HERMES_HOME": str(tmp_path), **env}, path)
    assert [str(p) for p in result.problems] == []
    assert result.settings.file_signals == frozenset(signals)
