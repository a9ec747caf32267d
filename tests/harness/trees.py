"""Span-tree helpers for exact assertions on received traces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def tree(spans: Sequence[Any]) -> list:
    """Nested [name, [children...]] lists, children in start order, for one or more traces."""
    by_parent: dict[Any, list] = {}
    ids = {s.span_id for s in spans}
    for span in sorted(spans, key=lambda s: (s.start_ns, s.name)):
        parent = span.parent_span_id if span.parent_span_id in ids else None
        by_parent.setdefault(parent, []).append(span)

    def build(parent: Any) -> list:
        return [[s.name, build(s.span_id)] if by_parent.get(s.span_id) else s.name for s in by_parent.get(parent, [])]

    return build(None)


def layer_chain(kind: str, terminal: str, order: Sequence[str], broken: str | None = None) -> list | str:
    """The expected subtree of a call's middleware chain: each plugin's layer (`{kind} {plugin}`) inside the one
    before it, the real call innermost; a `broken` layer (raising before `next_call`) has the rest of the chain beside
    it, as Hermes runs the rest from the frame of the layer before."""
    if not order:
        return terminal
    name, rest = f"{kind} {order[0]}", order[1:]
    if order[0] == broken:
        return name
    if rest and rest[0] == broken:
        return [name, [layer_chain(kind, terminal, rest[:1], broken), layer_chain(kind, terminal, rest[1:], broken)]]
    return [name, [layer_chain(kind, terminal, rest, broken)]]


def only(spans: Sequence[Any], name: str) -> Any:
    matches = [s for s in spans if s.name == name]
    assert len(matches) == 1, f"expected exactly one {name!r}, found {len(matches)}: {[s.name for s in spans]}"
    return matches[0]


def named(spans: Sequence[Any], name: str) -> list:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_ns)


def is_subagent(span: Any) -> bool:
    """A subagent's span: `invoke_agent hermes`, told from a turn's by the subagent's attributes."""
    return span.name == "invoke_agent hermes" and "hermes.subagent.child_session_id" in span.attributes


def subagents(spans: Sequence[Any]) -> list:
    return sorted((s for s in spans if is_subagent(s)), key=lambda s: s.start_ns)


def turn_roots(spans: Sequence[Any]) -> list:
    """The turns' `invoke_agent hermes` spans (not subagents'), oldest first."""
    return [s for s in named(spans, "invoke_agent hermes") if not is_subagent(s)]
