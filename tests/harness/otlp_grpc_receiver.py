"""A real OTLP/gRPC receiver on loopback (traces, logs, metrics), decoding like the HTTP one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.harness.otlp_receiver import (
    RecvLog,
    RecvMetric,
    RecvSpan,
    _decode_logs,
    _decode_metrics,
    _decode_spans,
)


class OTLPGrpcReceiver(
    trace_service_pb2_grpc.TraceServiceServicer,
    logs_service_pb2_grpc.LogsServiceServicer,
    metrics_service_pb2_grpc.MetricsServiceServicer,
):
    def __init__(self, *, answer: grpc.StatusCode | None = None, hang: bool = False, port: int = 0,
                 identity_only: bool = False, empty_ok: bool = False, max_message: int | None = None) -> None:
        """`answer`: a status every Export fails with instead of receiving (an endpoint that refuses); `empty_ok`:
        except an empty one, taken as any live collector takes it (an endpoint that refuses the batches); `hang`: every
        Export is taken and never answered (until the receiver stops); `port`: a fixed one (a collector back on its
        address); `identity_only`: gRPC's own compression setting allows no compression, so the server refuses a
        compressed request (UNIMPLEMENTED) before any handler: proof of what the client sent; `max_message`: the
        largest request taken, in bytes (a collector's `max_recv_msg_size_mib`): a larger one is RESOURCE_EXHAUSTED."""
        self.answer, self.hang, self.empty_ok = answer, hang, empty_ok
        self.empty = 0  # empty requests taken
        self.refused = 0
        self.hung = 0
        self.on_hang: Callable[[int], None] | None = None  # told the count of calls hung so far, as each one hangs
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._spans: list[RecvSpan] = []
        self._logs: list[RecvLog] = []
        self._metrics: list[RecvMetric] = []
        self.log_requests = 0
        self.metric_requests = 0
        self.metadata: list[dict[str, str]] = []  # each request's headers
        options = [("grpc.compression_enabled_algorithms_bitset", 1)] if identity_only else []  # bit 0: identity
        if max_message is not None:
            options.append(("grpc.max_receive_message_length", max_message))
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(self, self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(self, self._server)
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OTLPGrpcReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.stop(grace=None)

    # gRPC service methods (one Export per service; dispatched by request type)
    def Export(self, request, context):  # noqa: N802 - gRPC naming
        if self.empty_ok and not request.ListFields():
            with self._lock:
                self.empty += 1
            return _RESPONSES[type(request)]()
        if self.answer is not None:
            with self._lock:
                self.refused += 1
            context.abort(self.answer, f"refused with {self.answer.name}")
        if self.hang:
            with self._lock:
                self.hung += 1
                if self.on_hang is not None:
                    self.on_hang(self.hung)
            self._release.wait()
            context.abort(grpc.StatusCode.UNAVAILABLE, "stopped")
        with self._lock:
            self.metadata.append({k: v for k, v in context.invocation_metadata() if isinstance(v, str)})
            if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
                self._spans.extend(_decode_spans(request))
                return trace_service_pb2.ExportTraceServiceResponse()
            if isinstance(request, logs_service_pb2.ExportLogsServiceRequest):
                self.log_requests += 1
                self._logs.extend(_decode_logs(request))
                return logs_service_pb2.ExportLogsServiceResponse()
            self.metric_requests += 1
            self._metrics.extend(_decode_metrics(request))
            return metrics_service_pb2.ExportMetricsServiceResponse()

    def spans(self) -> list[RecvSpan]:
        with self._lock:
            return list(self._spans)

    def logs(self) -> list[RecvLog]:
        with self._lock:
            return list(self._logs)

    def metrics(self) -> list[RecvMetric]:
        """Every metric received, in order (cumulative: the last one with a name is current)."""
        with self._lock:
            return list(self._metrics)

    def wait_for_spans(self, predicate: Callable[[list[RecvSpan]], bool], timeout: float = 10) -> list[RecvSpan]:
        return _wait(self.spans, predicate, timeout, "spans")

    def wait_for_logs(self, predicate: Callable[[list[RecvLog]], bool], timeout: float = 10) -> list[RecvLog]:
        return _wait(self.logs, predicate, timeout, "logs")

    def wait_for_metrics(self, predicate: Callable[[list[RecvMetric]], bool], timeout: float = 10) -> list[RecvMetric]:
        return _wait(self.metrics, predicate, timeout, "metrics")


_RESPONSES = {trace_service_pb2.ExportTraceServiceRequest: trace_service_pb2.ExportTraceServiceResponse,
              logs_service_pb2.ExportLogsServiceRequest: logs_service_pb2.ExportLogsServiceResponse,
              metrics_service_pb2.ExportMetricsServiceRequest: metrics_service_pb2.ExportMetricsServiceResponse}


def _wait(read: Callable[[], list], predicate: Callable[[list], bool], timeout: float, what: str) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = read()
        if predicate(got):
            return got
        time.sleep(0.05)
    raise AssertionError(f"gRPC receiver: condition on {what} not met; got {[getattr(x, 'name', x) for x in read()]}")
