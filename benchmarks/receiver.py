"""An OTLP/HTTP receiver in its own process, so its parsing does not count as our CPU time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class ReceiverProcess:
    def __enter__(self) -> ReceiverProcess:
        code = ("import sys; from tests.harness.otlp_receiver import OTLPReceiver\n"
                "with OTLPReceiver() as r:\n    print(r.endpoint, flush=True); sys.stdin.read()\n")
        self.proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.endpoint = self.proc.stdout.readline().strip()
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)
