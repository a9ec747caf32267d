"""The optional `[grpc]` extra: whether OTLP over gRPC can be used here, and the one message that says it cannot.

`OTEL_EXPORTER_OTLP_PROTOCOL=grpc` (or `otlp.protocol`, or a NeMo Relay `transport = "grpc"`) needs grpcio and the
SDK's gRPC exporter, which the runtime dependencies leave out (Hermes 0.2x pins only the HTTP exporter).
"""

from __future__ import annotations


class GrpcMissing(ImportError):
    """OTLP/gRPC was asked for, and the `[grpc]` extra is not installed."""


def grpc_missing() -> str | None:
    """None when OTLP/gRPC can be used, else why not, for a person (imports grpc: only where gRPC is asked for)."""
    try:
        import grpc  # noqa: F401
        import opentelemetry.exporter.otlp.proto.grpc  # noqa: F401
    except ImportError as exc:
        return ("OTLP over gRPC needs the optional package opentelemetry-exporter-otlp-proto-grpc, not installed "
                f"(hermes-otel's `grpc` extra, `hermes-otel[grpc]`; or use the protocol http/protobuf; {exc})")
    return None
