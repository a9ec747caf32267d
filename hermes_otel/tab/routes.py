"""The Traces tab's API, mounted by `hermes dashboard` at `/api/plugins/hermes_otel/` (behind its session token).

GET only and read only; no route takes a file path: the files are the configured local record (`file.directory`,
as `hermes-otel view` reads it). What is shown is what the file exporter wrote, so capture modes and redaction
apply as they are. Each request reads the end of the files again (the newest turns), so a turn that ended
since the last poll is in the next answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query

from .. import config
from ..local import summary
from ..local.decode import HEX_ID
from ..local.traces import RequestError, read_traces

router = APIRouter()

SCAN = 1000  # turns searched by a filter or summed by the sessions view: the newest ones


def _directory() -> Path:
    return config.load_settings().settings.file_directory


def _newest(last: int) -> tuple[list[Any], dict[str, Any]]:
    directory = _directory()
    if not directory.exists():
        return [], {"recorded": False, "skipped_lines": 0, "complete": True}
    try:
        reading = read_traces(directory, last=last)
    except OSError as exc:
        raise HTTPException(503, f"cannot read the local record ({exc.strerror or type(exc).__name__})") from None
    return reading.traces, {"recorded": True, "skipped_lines": reading.bad_lines, "complete": reading.complete}


@router.get("/traces")
def traces(limit: int = Query(50, ge=1, le=500), errors: bool = False, model: str = Query("", max_length=200),
           session: str = Query("", max_length=200), rewrites: bool = False,
           q: str = Query("", max_length=200)) -> dict[str, Any]:
    """The newest turns, newest first; with filters, those of the newest SCAN turns that match."""
    filters = summary.Filters(errors=errors, model=model, session=session, rewrites=rewrites, text=q)
    found, meta = _newest(SCAN if filters else limit)
    rows = []
    for trace in reversed(found):
        row = summary.turn_row(trace)
        if summary.matches(trace, row, filters):
            rows.append(row)
            if len(rows) == limit:
                break
    return {**meta, "traces": rows}


@router.get("/traces/{trace_id}")
def trace(trace_id: str) -> dict[str, Any]:
    """One trace by its full id: the waterfall's spans with their attributes and events."""
    if len(trace_id) != 32 or not HEX_ID.fullmatch(trace_id):
        raise HTTPException(400, "expected a trace id of 32 hexadecimal digits")
    directory = _directory()
    if not directory.exists():
        raise HTTPException(404, "no such trace in the local record")
    try:
        reading = read_traces(directory, trace_id=trace_id)
    except RequestError as exc:
        raise HTTPException(400, str(exc)) from None
    except OSError as exc:
        raise HTTPException(503, f"cannot read the local record ({exc.strerror or type(exc).__name__})") from None
    if not reading.traces:
        raise HTTPException(404, "no such trace in the local record")
    return summary.detail(reading.traces[0])


@router.get("/sessions")
def sessions() -> dict[str, Any]:
    """Per session and profile over the newest SCAN turns: turns, tokens, cost (the turns' roll-ups), errors."""
    found, meta = _newest(SCAN)
    return {**meta, "sessions": summary.sessions(summary.turn_row(t) for t in found)}
