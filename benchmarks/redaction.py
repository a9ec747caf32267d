"""Redaction's cost per KiB on inputs built to make a pattern work hard: each value pattern of
`hermes_otel.redaction.content` fed long runs of its own trigger words and near-matches (back to back, spaced,
inside URL-like and `name="` shapes), at 16 KiB and 1 MiB, and the whole `redact_text` on a 1 MiB line of each.
A pattern whose cost per KiB grows with the input (quadratic) shows as a ratio well above 1 and is flagged.

Writes benchmarks/results/redaction.json and prints a table (µs per KiB). Run by `make bench`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes_otel.redaction import content  # noqa: E402

SIZES = (16 * 1024, 1024 * 1024)
SHAPES = {
    "spaced": lambda needle: f"{needle} x{'y' * 8} ",
    "back to back": lambda needle: needle,
    "url-like": lambda needle: f"h://u:{needle}/",
    "name=\"": lambda needle: f'{needle}="',
    "flag-like": lambda needle: f"{needle} -q ",
}


def _text(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _us_per_kib(fn, text: str) -> float:
    started = time.perf_counter()
    fn(text)
    return (time.perf_counter() - started) / (len(text) / 1024) * 1e6


def main() -> int:
    rows = []
    for index, (needles, _folded, pattern, replacement) in enumerate(content._VALUE_PATTERNS):
        worst = None

        def run(text: str, pattern=pattern, replacement=replacement) -> None:
            pattern.sub(replacement, text)

        for shape, make in SHAPES.items():
            unit = make(needles[0])
            small, large = (_us_per_kib(run, _text(unit, size)) for size in SIZES)
            row = {"pattern": index, "needle": needles[0], "input": shape, "us_per_kib_16k": round(small, 1),
                   "us_per_kib_1m": round(large, 1), "growth": round(large / max(small, 0.1), 2)}
            if worst is None or row["us_per_kib_1m"] > worst["us_per_kib_1m"]:
                worst = row
        rows.append(worst)
    whole = [{"input": f"redact_text, 1 MiB of {needles[0]!r} spaced",
              "us_per_kib_1m": round(_us_per_kib(lambda t: content.redact_text(t, hermes=False),
                                                 _text(SHAPES["spaced"](needles[0]), SIZES[1])), 1)}
             for needles, *_ in content._VALUE_PATTERNS[::4]]
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "redaction.json").write_text(json.dumps({"patterns": rows, "redact_text": whole}, indent=2))
    print("pattern  needle                 worst input     16 KiB    1 MiB   growth   (µs per KiB)")
    for row in rows:
        flag = "  <-- grows with the input" if row["growth"] > 3 and row["us_per_kib_1m"] > 50 else ""
        print(f"{row['pattern']:7d}  {row['needle']!r:22} {row['input']:14} {row['us_per_kib_16k']:8.1f} "
              f"{row['us_per_kib_1m']:8.1f} {row['growth']:7.2f}{flag}")
    for row in whole:
        print(f"{row['input']:60} {row['us_per_kib_1m']:8.1f} µs per KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
