"""Batches an OTLP endpoint could not take: the spooling wrapper of each OTLP exporter (`delivery`), the batches on
disk (`store`) and their background re-sender (`resend`). Loaded with the first OTLP endpoint, never for files only."""

from . import delivery
from .resend import resender, targets_of
from .store import spool_for

__all__ = ["delivery", "resender", "spool_for", "targets_of"]
