"""Generated reference pages are committed up to date, and the catalog is self-consistent."""

from __future__ import annotations

from pathlib import Path

from hermes_otel import catalog
from hermes_otel.config import schema as config_schema
from hermes_otel.reference import PAGES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_generated_pages_are_current():
    for name, render in PAGES.items():
        committed = (DOCS / name).read_text(encoding="utf-8")
        assert committed == render(), f"docs/{name} is stale: run `python -m hermes_otel.reference docs`"


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
