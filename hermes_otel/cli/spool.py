"""`hermes-otel spool` (status, send, drop) and what `hermes-otel doctor` says about the spool."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import config
from ..exporters.spool.resend import SendReport, send_all, targets_of
from ..exporters.spool.store import SIGNALS, Entry, NotABatch, Spool, Stray, open_spool
from ..redaction import masking


def add_parser(sub: Any) -> None:
    spool = sub.add_parser("spool", help="telemetry waiting to be re-sent: status (the default), send, drop",
                           description="The spool: what an OTLP endpoint could not take, kept on disk "
                           "($HERMES_HOME/otel/spool) and re-sent in the background by the next hermes process.")
    commands = spool.add_subparsers(dest="spool_command")
    commands.add_parser("status", help="batches, bytes and the oldest age per signal, and where they go",
                        description="Per signal: the batches, bytes and oldest age waiting in the spool; which "
                        "endpoint they wait for (or that it is not configured now), and anything in the spool that "
                        "is not a batch.")
    commands.add_parser("send", help="send every spooled batch now (to the endpoints configured now)",
                        description="Send every spooled batch now, oldest first and unpaced, each to the endpoint it "
                        "was spooled for, with the same headers (a changed tenant key never gets another's batches), "
                        "with progress. An endpoint that fails is "
                        "skipped for the rest of the run. Exit status 1 when something was kept or skipped; Ctrl-C "
                        "stops it (exit status 130) and what was not sent stays spooled.")
    drop = commands.add_parser("drop", help="delete every spooled batch (asks first)",
                               description="Delete every spooled batch, and anything in the spool that is not a "
                               "batch, after asking (--yes does not ask). They were never delivered.")
    drop.add_argument("-y", "--yes", action="store_true", help="do not ask")


def run(args: argparse.Namespace) -> int:
    settings = config.load_settings().settings
    spool = open_spool(settings.spool_directory, settings.spool_max_bytes, settings.spool_max_age_s)
    command = args.spool_command or "status"
    if command == "send":
        return _send(spool, settings)
    if command == "drop":
        return _drop(spool, args.yes)
    for line in status_lines(spool, settings):
        print(masking.printable(line))
    return 0


def status_lines(spool: Spool, settings: config.Settings) -> list[str]:
    entries, strays = spool.scan()
    state = "on" if settings.spool_enabled else "off (spool = false: undeliverable telemetry is dropped)"
    lines = [f"spool {spool.directory}: {state}; caps {_size(settings.spool_max_bytes)}, "
             f"{_age(settings.spool_max_age_s)}",
             f"  {'signal':<8} {'batches':>8} {'bytes':>10}  oldest"]
    now = time.time()
    for signal in SIGNALS:
        mine = [e for e in entries if e.signal == signal]
        oldest = _age(now - min(e.mtime for e in mine)) if mine else "-"
        lines.append(f"  {signal:<8} {len(mine):>8} {_size(sum(e.size for e in mine)):>10}  {oldest}")
    lines += _destinations(entries, settings)
    lines += [f"  {stray.text()}" for stray in strays]
    return lines


def _destinations(entries: list[Entry], settings: config.Settings) -> list[str]:
    targets = targets_of(settings)
    waiting = Counter((e.signal, e.key) for e in entries)
    lines, orphans = [], 0
    for (signal, key), count in sorted(waiting.items()):
        target = targets.get((signal, key))
        if target is not None:
            lines.append(f"  {count} {signal} batch{'es' if count != 1 else ''} for "
                         f"{masking.mask_url(target.endpoint)} ({target.protocol}): re-sent by the next hermes "
                         "process once it answers, or now with `hermes-otel spool send`")
        else:
            orphans += count
    if orphans:
        lines.append(f"  {orphans} batch{'es' if orphans != 1 else ''} for an endpoint not configured now: kept until "
                     "spool_max_age (or `hermes-otel spool drop`); they are sent again if that endpoint is configured")
    return lines


def _strays(strays: list[Stray]) -> None:
    for stray in strays:
        print(masking.printable(f"hermes-otel spool: {stray.text()}"), file=sys.stderr)


def _send(spool: Spool, settings: config.Settings) -> int:
    targets = targets_of(settings)
    entries, strays = spool.scan()
    if not entries:
        _strays(strays)
        print("hermes-otel spool: nothing to send")
        return 1 if strays else 0
    print(f"sending {len(entries)} spooled batch{'es' if len(entries) != 1 else ''} "
          f"({_size(sum(e.size for e in entries))})...")
    last = [0.0]

    def progress(report: SendReport, total: int) -> None:
        done = report.sent + report.rejected + report.unreadable + report.failed + report.busy + report.no_target
        if time.monotonic() - last[0] >= 1.0 or done == total:
            last[0] = time.monotonic()
            print(f"  {done}/{total}: sent {report.sent} ({report.items} items)", flush=True)

    report = send_all(spool, targets, progress)
    _strays(report.strays)
    for endpoint, detail in report.problems.items():
        print(masking.printable(f"hermes-otel spool: {masking.mask_url(endpoint)}: {masking.mask_text(detail)}"),
              file=sys.stderr)
    kept = report.failed + report.busy + report.no_target + len(report.strays)
    parts = [f"sent {report.sent} batch{'es' if report.sent != 1 else ''} ({report.items} spans, log records and "
             "metric points)"]
    if report.bad_lines:
        parts.append(f"{report.bad_lines} unreadable line{'s' if report.bad_lines != 1 else ''} skipped")
    if report.strays:
        parts.append(f"{len(report.strays)} skipped: not a batch")
    if report.failed:
        parts.append(f"{report.failed} kept: their endpoint did not take them now")
    if report.busy:
        parts.append(f"{report.busy} being sent by another process")
    if report.no_target:
        parts.append(f"{report.no_target} kept for an endpoint not configured now")
    if report.rejected or report.unreadable:
        parts.append(f"{report.rejected + report.unreadable} removed: rejected by the endpoint or unreadable")
    print("hermes-otel spool: " + "; ".join(parts))
    return 1 if kept else 0


def _drop(spool: Spool, yes: bool, ask: Callable[[str], str] = input) -> int:
    entries, strays = spool.scan()
    refused = [s for s in strays if not s.removable]
    strays = [s for s in strays if s.removable]
    _strays(refused)  # a folder we do not read is not emptied either
    if not entries and not strays:
        print("hermes-otel spool: nothing to drop")
        return 1 if refused else 0
    what = f"{len(entries)} spooled batch{'es' if len(entries) != 1 else ''} ({_size(sum(e.size for e in entries))})"
    if strays:
        many = len(strays) != 1
        what += f" and {len(strays)} entr{'ies' if many else 'y'} that {'are' if many else 'is'} not a batch"
    if not yes:
        try:
            answer = ask(f"Delete {what} for good? They were never delivered. [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("hermes-otel spool: nothing deleted")
            return 1
    dropped = busy = 0
    for entry in entries:
        try:
            with spool.claim(entry) as fd:
                if fd is None:
                    busy += 1
                    continue
                spool.remove(entry)
                dropped += 1
        except NotABatch as exc:  # became something else since the listing: removed by name, never opened
            strays.append(Stray(entry.path, str(exc)))
    removed = sum(_unlink(stray.path) for stray in strays)
    done = [f"{dropped} batch{'es' if dropped != 1 else ''}"] if dropped or not removed else []
    if removed:
        done.append(f"{removed} entr{'ies' if removed != 1 else 'y'} that {'were' if removed != 1 else 'was'} "
                    "not a batch")
    print("hermes-otel spool: deleted " + " and ".join(done)
          + (f"; {busy} were being sent by another process" if busy else ""))
    return 0


def _unlink(path: Path) -> bool:
    """Remove a name (a link itself, never its target)."""
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def doctor_lines(settings: config.Settings) -> list[tuple[str, str]]:
    """(level, text) lines for `doctor`: ok, warn, fail or note."""
    from ..exporters.private import problem

    spool = open_spool(settings.spool_directory, settings.spool_max_bytes, settings.spool_max_age_s)
    entries, strays = spool.scan()
    waiting = ""
    if entries:
        by_signal = Counter(e.signal for e in entries)
        waiting = (f"{len(entries)} batch{'es' if len(entries) != 1 else ''} ({_size(sum(e.size for e in entries))}) "
                   f"wait{'s' if len(entries) == 1 else ''} to be re-sent, the oldest "
                   f"{_age(time.time() - min(e.mtime for e in entries))} old ("
                   + ", ".join(f"{s} {by_signal[s]}" for s in SIGNALS if by_signal[s]) + ")")
    if not settings.spool_enabled:
        lines = [("note", "spool off (spool = false): telemetry an endpoint cannot take is dropped and counted")]
        if entries:
            lines.append(("warn", f"spool {spool.directory}: {waiting}; nothing sends them while the spool is off "
                                  "(`hermes-otel spool send` does)"))
        return lines
    why = problem(spool.directory, ())
    if why:
        return [("fail", f"spool directory {spool.directory} {why}: telemetry an endpoint cannot take will be "
                         "dropped")]
    lines = []
    if not targets_of(settings):
        lines.append(("ok", f"spool {spool.directory}: on (no OTLP endpoint now: nothing to keep)"))
    elif entries:
        lines.append(("warn", f"spool {spool.directory}: {waiting}; the next hermes process sends them once the "
                              "endpoint answers (`hermes-otel spool` for details, `hermes-otel spool send` to send "
                              "now)"))
    else:
        lines.append(("ok", f"spool {spool.directory}: empty (caps {_size(settings.spool_max_bytes)}, "
                            f"{_age(settings.spool_max_age_s)})"))
    targets = targets_of(settings)
    orphans = sum(1 for e in entries if (e.signal, e.key) not in targets)
    if orphans and targets:
        lines.append(("warn", f"{orphans} spooled batch{'es' if orphans != 1 else ''} for an endpoint not "
                              "configured now: kept until spool_max_age (`hermes-otel spool drop` deletes them)"))
    lines += [("warn", f"spool: {stray.text()}") for stray in strays]
    return lines


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _age(seconds: float) -> str:
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"
