"""Span lifecycle of what Hermes does, one small module per entity over one bounded map."""

from .calls import Call
from .tracker import Tracker
from .turns import Turn

__all__ = ["Call", "Tracker", "Turn"]
