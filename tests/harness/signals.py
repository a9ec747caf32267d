"""A child that gets Ctrl-C as a terminal would send it, however the suite was started."""

from __future__ import annotations

import signal


def ctrl_c_as_typed() -> None:
    """`preexec_fn` of a child a test interrupts: a shell's background job (`cmd &`) starts with SIGINT ignored and
    every child inherits that, so Python would never raise KeyboardInterrupt; restore the default first."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
