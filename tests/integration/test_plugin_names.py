"""The four middleware plugins of tests/hermes2x's run (two named to load before hermes_otel, one of them broken, one
after, one that declares `requires_plugins`), through a real `hermes chat` on hermes-agent 0.19.0: the picture the
0.2x line is held to. 0.19 loads directory plugins by name only (it has no `requires_plugins`), so its chain is
acme_guard, beacon, cache_flaky, zz_audit; every layer is a span in that order, with its outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.hermes import chat_through_plugins
from tests.harness.trees import layer_chain, tree

pytestmark = pytest.mark.hermes

ORDER = ("acme_guard", "beacon", "cache_flaky", "zz_audit")  # by name
BROKEN = "cache_flaky"  # its llm_execution layer raises before next_call


@pytest.mark.timeout(300)
def test_every_layer_is_a_span_whatever_the_plugins_are_called(tmp_path: Path) -> None:
    _result, spans = chat_through_plugins(tmp_path / "home", ORDER)

    llm = ["chat fake-model", [layer_chain("llm_execution", "provider_call fake-model", ORDER, BROKEN)]]
    tool = ["execute_tool terminal", [layer_chain("tool_execution", "tool_call terminal", ORDER)]]
    assert tree(spans) == [["invoke_agent hermes", [llm, tool, llm]]]
    layers = {(s.name.split()[0], s.attributes["hermes.middleware.plugin"], s.attributes["hermes.middleware.index"],
               s.attributes["hermes.middleware.outcome"]) for s in spans if "hermes.middleware.plugin" in s.attributes}
    assert layers == {(kind, plugin, index, "fail_open" if (kind, plugin) == ("llm_execution", BROKEN) else "ok")
                      for kind in ("llm_execution", "tool_execution") for index, plugin in enumerate(ORDER)}
