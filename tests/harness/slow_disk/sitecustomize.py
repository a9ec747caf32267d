"""A slow disk under the traces file, for a test that must force a race rather than hope to hit it.

Python imports `sitecustomize` at start-up from the path; a test puts this directory on PYTHONPATH of a real
`hermes chat` and sets HERMES_OTEL_TEST_SLOW_TRACES_WRITE_S: every write to a `traces.jsonl` then takes that long
first, as on a slow or busy disk. Nothing else changes.
"""

import os
import time

_DELAY_S = float(os.environ.get("HERMES_OTEL_TEST_SLOW_TRACES_WRITE_S") or 0)

if _DELAY_S > 0:
    from hermes_otel.exporters.file import exporter as _file

    _write = _file.RotatingJsonLinesWriter.write

    def _slow_write(self, obj):
        if self.path.name == "traces.jsonl":
            time.sleep(_DELAY_S)
        return _write(self, obj)

    _file.RotatingJsonLinesWriter.write = _slow_write
