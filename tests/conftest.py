"""Session-wide reporting: live tests that could not run are said in one visible line."""

from __future__ import annotations

from tests.harness import otelcol


def pytest_terminal_summary(terminalreporter) -> None:
    if otelcol.skipped_for_go:
        terminalreporter.write_line(
            f"NOT RUN: {len(otelcol.skipped_for_go)} Collector/Jaeger live tests ({otelcol.NO_GO}): "
            + ", ".join(sorted({nodeid.split('::')[0] for nodeid in otelcol.skipped_for_go})),
            yellow=True, bold=True,
        )
