"""The secrets a unit test's configuration remembered are forgotten after it: one store redacts captured content
and log lines alike, so a value one test configured must not be redacted from another test's text. (Integration
tests keep what the plugin remembered when it registered, as a real process does.)"""

from __future__ import annotations

import pytest

from hermes_otel.redaction import content


@pytest.fixture(autouse=True)
def _remembered_secrets_are_the_tests_own():
    before = dict(content._secrets)
    yield
    with content._lock:
        content._secrets.clear()
        content._secrets.update(before)
        content._longest_first = None
        content._forget_redacted()
