"""The Traces tab on every release whose dashboard prints its port (`make test-matrix`): the same real `hermes
dashboard` + headless Chromium test as tests/integration/test_dashboard_tab.py, over a real `hermes chat` run with
the demo's middleware plugin, enabled and installed by `hermes-otel enable`.

0.16.0 is skipped: its dashboard loads plugin tabs too, but has no middleware (no layer bar, no rewrite marker to
check) and prints no HERMES_DASHBOARD_READY line, so a test cannot learn the free port it took. On the reference
release (0.19.0) the integration test itself runs in `make test`."""

from __future__ import annotations

from importlib import metadata

import pytest

from tests.integration.test_dashboard_tab import dashboard, test_the_traces_tab_in_a_real_dashboard_and_browser

HERMES = metadata.version("hermes-agent")
pytestmark = [
    pytest.mark.hermes,
    pytest.mark.skipif(HERMES == "0.16.0", reason="hermes-agent 0.16.0: no middleware, no ready line"),
    pytest.mark.skipif(HERMES == "0.19.0", reason="the reference release: tests/integration/test_dashboard_tab.py"),
]

__all__ = ["dashboard", "test_the_traces_tab_in_a_real_dashboard_and_browser"]
