"""Times hermes-otel's own part of a process's exit, for the benchmark.

Python imports `sitecustomize` at start-up from the path; the benchmark puts this directory on PYTHONPATH of a real
`hermes chat` and names a file in HERMES_OTEL_TEST_EXIT_TIMING: `hermes_otel.runtime.shutdown`, which atexit runs,
then appends its duration in seconds to that file. Nothing else changes.
"""

import os
import time

_OUT = os.environ.get("HERMES_OTEL_TEST_EXIT_TIMING")

if _OUT:
    from hermes_otel import runtime

    _shutdown = runtime.shutdown

    def _timed_shutdown() -> None:
        started = time.perf_counter()
        try:
            _shutdown()
        finally:
            with open(_OUT, "a", encoding="utf-8") as handle:
                handle.write(f"{time.perf_counter() - started:.6f}\n")

    runtime.shutdown = _timed_shutdown
