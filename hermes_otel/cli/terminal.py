"""Whether output gets colour: `--color always|never`, else a terminal that has not asked for none."""

from __future__ import annotations

import os
import sys
from typing import TextIO


def wants_color(choice: str = "auto", stream: TextIO | None = None) -> bool:
    """`always` / `never` as said; `auto`: a terminal, unless `NO_COLOR` is set to anything non-empty
    (no-color.org) or `TERM` is `dumb`."""
    if choice in ("always", "never"):
        return choice == "always"
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False
