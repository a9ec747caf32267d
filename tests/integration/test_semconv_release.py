"""A real `hermes chat` emits the latest GenAI conventions' names by default, and v1.41.0's beside them under
`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup`: every GenAI name of the run held to the release it is emitted for, as
tests/unit/test_semconv_registry.py reads the conventions (the packages' v1.41.0 model, and the GenAI repository's
latest names and migration guide). The 0.2x lane runs the same chat (tests/hermes2x)."""

from __future__ import annotations

import pytest

from tests.harness.semconv_run import LATEST_METRICS, check_chats, run_chat
from tests.unit.test_semconv_registry import AHEAD_OF_PACKAGES, REPLACED_BY_LATEST, load_registry, load_util_genai

pytestmark = pytest.mark.hermes


def test_latest_by_default_and_v1_41_beside_it_under_gen_ai_dup(tmp_path):
    registry, genai = load_registry(), load_util_genai()
    latest, latest_chats = run_chat(tmp_path / "latest")
    both, dup_chats = run_chat(tmp_path / "dup", OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai/dup")
    assert latest == LATEST_METRICS
    for name in latest:  # each a name of the latest release: ahead of the packages, or one it kept
        assert name in AHEAD_OF_PACKAGES or name in genai.metrics or (
            name in registry.metrics and name not in REPLACED_BY_LATEST), name
    assert both - latest == {n for n in REPLACED_BY_LATEST if n in registry.metrics}  # v1.41.0's metrics
    check_chats(latest_chats, dup_chats)
