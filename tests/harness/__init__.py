"""Test-only infrastructure: real servers the plugin's exporters talk to."""

from .otlp_receiver import OTLPReceiver, RecvLog, RecvMetric, RecvSpan

__all__ = ["OTLPReceiver", "RecvLog", "RecvMetric", "RecvSpan"]
