"""The Traces tab's API, mounted by `hermes dashboard` at `/api/plugins/hermes_otel/` (behind its session token).

GET only and read only; no route takes a file path or an address: the files are the configured local record
(`file.directory`, as `hermes-otel view` reads it), and `source=jaeger` asks the Jaeger query API named by
HERMES_OTEL_JAEGER_URL in the dashboard's environment. What is shown is what the exporters wrote, so capture modes
and redaction apply as they are. Each request sees the files as they are now, so a turn that ended since the last
poll is in the next answer; record.py bounds the reading (one scan at once, an earlier one's turns reused).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query

from .. import config, hermes_compat
from ..local import summary
from ..local.decode import HEX_ID
from ..local.traces import RequestError, Trace, read_traces
from . import jaeger, record

router = APIRouter()

SCAN = record.SCAN  # turns searched by a filter or summed by the sessions view: the newest ones
JAEGER_SCAN = 200  # the same, from Jaeger (each answer carries every span of its traces)
SOURCE = Query("files", pattern="^(files|jaeger)$")


def _directory() -> Path:
    """Where the record of the profile this request runs in is (Hermes 0.22 scopes each plugin route to the
    `?profile=` asked for, its HERMES_HOME with it; elsewhere the process's own)."""
    home = hermes_compat.scoped_home()
    env = os.environ if home is None else {**os.environ, "HERMES_HOME": home}
    return config.load_settings(env).settings.file_directory


def _jaeger() -> str:
    base = jaeger.configured()
    if base is None:
        raise HTTPException(404, f"no Jaeger query API configured ({jaeger.ENV})")
    return base


def _from_jaeger(ask: Callable[..., Any], *args: Any) -> Any:
    """Jaeger's answer; busy (MAX_IN_FLIGHT already waiting) is 503, anything else it did wrong 502."""
    try:
        return ask(*args)
    except jaeger.JaegerBusy as exc:
        raise HTTPException(503, str(exc)) from None
    except jaeger.JaegerError as exc:
        raise HTTPException(502, str(exc)) from None


def _newest(last: int, source: str = "files") -> tuple[list[Trace], dict[str, Any]]:
    if source == "jaeger":
        found = _from_jaeger(jaeger.newest, _jaeger(), config.load_settings().settings.service_name,
                             min(last, JAEGER_SCAN))
        return found, {"recorded": True, "skipped_lines": 0, "complete": True}
    directory = _directory()
    if not directory.exists():
        return [], {"recorded": False, "skipped_lines": 0, "complete": True}
    try:
        found, bad_lines, complete = record.newest(directory, last)
    except record.RecordBusy as exc:
        raise HTTPException(503, str(exc)) from None
    except OSError as exc:
        raise HTTPException(503, f"cannot read the local record ({exc.strerror or type(exc).__name__})") from None
    return found, {"recorded": True, "skipped_lines": bad_lines, "complete": complete}


@router.get("/traces")
def traces(limit: int = Query(50, ge=1, le=500), errors: bool = False, model: str = Query("", max_length=200),
           session: str = Query("", max_length=200), rewrites: bool = False,
           q: str = Query("", max_length=200), source: str = SOURCE) -> dict[str, Any]:
    """The newest turns, newest first; with filters, those of the newest SCAN turns that match."""
    filters = summary.Filters(errors=errors, model=model, session=session, rewrites=rewrites, text=q)
    found, meta = _newest(SCAN if filters else limit, source)
    rows = []
    for trace in reversed(found):
        row = summary.turn_row(trace)
        if summary.matches(trace, row, filters):
            rows.append(row)
            if len(rows) == limit:
                break
    return {**meta, "traces": rows}


@router.get("/traces/{trace_id}")
def trace(trace_id: str, source: str = SOURCE) -> dict[str, Any]:
    """One trace by its full id: the waterfall's spans with their attributes and events."""
    if len(trace_id) != 32 or not HEX_ID.fullmatch(trace_id):
        raise HTTPException(400, "expected a trace id of 32 hexadecimal digits")
    trace_id = trace_id.lower()
    if source == "jaeger":
        found = _from_jaeger(jaeger.one, _jaeger(), trace_id)
        if found is None:
            raise HTTPException(404, "no such trace in Jaeger")
        return summary.detail(found)
    directory = _directory()
    if not directory.exists():
        raise HTTPException(404, "no such trace in the local record")
    try:
        found = record.one(directory, trace_id)
        if found is None:
            with record.scan_slot():
                reading = read_traces(directory, trace_id=trace_id)
            if not reading.traces:
                raise HTTPException(404, "no such trace in the local record")
            found = reading.traces[0]
    except record.RecordBusy as exc:
        raise HTTPException(503, str(exc)) from None
    except RequestError as exc:
        raise HTTPException(400, str(exc)) from None
    except OSError as exc:
        raise HTTPException(503, f"cannot read the local record ({exc.strerror or type(exc).__name__})") from None
    return summary.detail(found)


@router.get("/sessions")
def sessions(source: str = SOURCE) -> dict[str, Any]:
    """Per session and profile over the newest SCAN turns: turns, tokens, cost (the turns' roll-ups), errors."""
    found, meta = _newest(SCAN, source)
    return {**meta, "sessions": summary.sessions(summary.turn_row(t) for t in found)}


@router.get("/sources")
def sources() -> dict[str, Any]:
    """Where traces can be read from, and the Jaeger address for "open in Jaeger" (when it holds no credentials)."""
    base = jaeger.configured()
    shown = base if base is not None and "@" not in urllib.parse.urlsplit(base).netloc else None
    return {"sources": ["files", "jaeger"] if base else ["files"], "jaeger_url": shown}
