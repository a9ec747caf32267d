"""The local-files reader never holds a line longer than MAX_LINE (docs/threat-model.md T16): both directions skip
it, count it as bad, and read it only in bounded pieces. MAX_LINE is lowered here so the test writes kilobytes,
not 64 MiB."""

from __future__ import annotations

import io

import pytest

from hermes_otel.local import files

CAP = 4096


class _Spy(io.BytesIO):
    """A file that remembers the largest single read asked of it."""

    largest = 0

    def readline(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        line = super().readline(size)
        self.largest = max(self.largest, len(line))
        return line

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.largest = max(self.largest, len(data))
        return data


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_a_line_over_the_cap_is_skipped_counted_and_never_held_whole(monkeypatch, direction):
    monkeypatch.setattr(files, "MAX_LINE", CAP)
    monkeypatch.setattr(files, "_BLOCK", 1024)
    data = b'{"first": 1}\n' + b"x" * (CAP * 8) + b'\n{"last": 2}\n'
    spy, counter = _Spy(data), files.Counter()
    lines = [line.rstrip(b"\n") for line in getattr(files, direction)(spy, len(data), counter)]
    expected = [b'{"first": 1}', b'{"last": 2}']
    assert lines == (expected if direction == "forward" else expected[::-1])
    assert (counter.lines, counter.bad) == (2, 1)
    assert spy.largest <= CAP + 1  # read in pieces: the overlong line is never in memory whole
