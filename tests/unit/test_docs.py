"""Generated reference pages are committed up to date, and the catalog is self-consistent."""

from __future__ import annotations

from pathlib import Path

from docsgen import catalog
from docsgen.reference import PAGES
from hermes_otel.config import schema as config_schema

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_generated_pages_are_current():
    for name, render in PAGES.items():
        committed = (DOCS / name).read_text(encoding="utf-8")
        assert committed == render(), f"docs/{name} is stale: run `python -m docsgen.reference docs`"


def test_every_catalog_attribute_is_described():
    used = {a for span in catalog.SPANS for a in span.attributes} | {a for m in catalog.METRICS for a in m.attributes}
    assert used <= set(catalog.ATTRIBUTES)


def test_every_config_key_is_documented():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for field in config_schema.FIELDS:
        assert f"| `{field.key}` |" in text
        if field.env:
            assert f"`{field.env}`" in text


def test_architecture_states_the_bounds_of_the_code():
    import inspect

    from hermes_otel.emitter import Emitter
    from hermes_otel.tracking import Tracker

    text = " ".join((DOCS / "architecture.md").read_text(encoding="utf-8").split())
    records = inspect.signature(Emitter).parameters["limit"].default
    open_items = inspect.signature(Tracker).parameters["max_turns"].default
    for phrase in (f"That queue is bounded ({records:,} records)", f"at most {open_items} open items each"):
        assert phrase in text, phrase


def test_reliability_states_the_constants_of_the_code():
    from hermes_otel.exporters.session import REFUSED
    from hermes_otel.exporters.spool import delivery, resend

    text = " ".join((DOCS / "reliability.md").read_text(encoding="utf-8").split())
    for phrase in (
        f"waits at most **{delivery.SPOOL_WAIT_S * 1000:g} ms** for in-flight exports",
        "it holds at most `batch.max_queue_size` items (2048 by default)",
        f"the batch processor's thread tries it again every {delivery.LIVE_RETRY_S:g} s",
        f"at least {resend.MIN_GAP_S * 1000:g} ms between batches, at most a quarter of one core",
        f"backs off ({resend.BACKOFF_S[0]:g} s doubling to {resend.BACKOFF_S[1]:g} s",
        "on its own (HTTP " + ", ".join(str(c) for c in sorted(REFUSED)[:-1])
        + f", {sorted(REFUSED)[-1]}; over gRPC, failed twice",
    ):
        assert phrase in text, phrase
    assert resend.BUSY_SHARE == 0.25  # "a quarter of one core"
    assert resend.REFUSALS == 2  # "twice"


def test_the_exit_wait_the_docs_promise_is_the_one_the_exporters_use():
    """"exit waits at most 100 ms": every place that promises it says the wait the spooling exporters use."""
    import re
    from pathlib import Path

    from hermes_otel.config.schema import FIELDS
    from hermes_otel.exporters.spool.delivery import SPOOL_WAIT_S

    root = Path(__file__).resolve().parents[2]
    promises = [f.doc for f in FIELDS if "at exit" in f.doc or "process exit" in f.doc]
    promises += [(root / "docs" / name).read_text() for name in ("index.md", "architecture.md")]
    said = {int(n) for text in promises for n in re.findall(r"(?:exit waits|waits) at most (\d+) ms", text)}
    assert said == {round(SPOOL_WAIT_S * 1000)}, said


def test_the_conventions_table_says_set_exactly_of_what_each_span_kind_documents():
    """docs/telemetry.md's conventions table: an attribute marked set is among the span kind's documented (and so,
    by tests/harness/documented.py, emitted) attributes; one marked not set is not."""
    from docsgen import catalog

    spans = {"chat": catalog.SPANS[1], "invoke_agent": catalog.SPANS[0], "execute_tool": catalog.SPANS[2]}
    for kind, rows in catalog.CONVENTIONS.items():
        documented = set(spans[kind].attributes)
        for name, level, how in rows:
            assert level in ("Required", "Conditionally Required", "Recommended", "Opt-In"), level
            assert (name in documented) is how.startswith("set"), (kind, name, how)
