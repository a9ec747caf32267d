"""The optional extras some tests need: the SDK 1.39 lane (`make test-sdk139`) installs none of them."""

from __future__ import annotations

import importlib.util

import pytest


def _installed(*modules: str) -> bool:
    try:
        return all(importlib.util.find_spec(module) is not None for module in modules)
    except ImportError:  # a parent package is missing
        return False


GRPC = _installed("grpc", "opentelemetry.exporter.otlp.proto.grpc")
needs_grpc = pytest.mark.skipif(not GRPC, reason="the [grpc] extra is not installed")
