"""Issue 27: fuzz targets for the spool's readers, bounded like tests/unit/test_fuzz.py (a fixed number of examples,
derandomized, so `make test` runs them in seconds and the same way every time).

Properties: the line reader never raises and accounts for every line; the conversion back to protobuf never raises,
skips and counts exactly the lines it cannot convert, and never builds a request of more than the batch size limit
plus one line; re-sending any file under a batch's name never raises and leaves the spool consistent (sent and
removed, or removed as unreadable); a spool directory holding anything (FIFOs, links, directories, files nobody
may read) is listed without blocking, every name either a batch or a stray."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_otel.config import OTLPTarget
from hermes_otel.exporters.spool.decode import pieces
from hermes_otel.exporters.spool.resend import send_all
from hermes_otel.exporters.spool.store import Requests, Spool, endpoint_key
from tests.harness.otlp_receiver import OTLPReceiver
from tests.unit.test_fuzz import FUZZ
from tests.unit.test_hostile_config import within


def to_request(signal: str, requests, *, paced: bool = True):
    """One batch of all of `requests`: (batch, items, bad lines), one piece without a size limit."""
    return next(pieces(signal, requests, paced=paced, limit=None))

VALID = {
    "traces": {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "s"}}]},
                                  "scopeSpans": [{"scope": {"name": "fuzz"}, "spans": [
                                      {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
                                       "parentSpanId": "", "name": "invoke_agent hermes", "kind": 1,
                                       "startTimeUnixNano": "1700000000000000000",
                                       "endTimeUnixNano": "1700000001000000000",
                                       "attributes": [{"key": "n", "value": {"intValue": "3"}}],
                                       "events": [{"name": "e", "timeUnixNano": "1700000000500000000"}],
                                       "status": {"code": 2}}]}]}]},
    "logs": {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {"name": "fuzz"}, "logRecords": [
        {"timeUnixNano": "1700000000000000000", "severityNumber": 9, "body": {"stringValue": "b"},
         "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "eventName": "hermes.x"}]}]}]},
}
MEMBERS = {"traces": ("resourceSpans", "scopeSpans", "spans"), "logs": ("resourceLogs", "scopeLogs", "logRecords")}
FIELDS = {"traces": ["traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano",
                     "attributes", "events", "status"],
          "logs": ["timeUnixNano", "severityNumber", "body", "traceId", "spanId", "eventName", "attributes"]}
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
              st.sampled_from(["zz", "0af7", "not-hex-at-all", "1e400", "-1", "NaN"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=12,
)


@st.composite
def requests(draw, signal: str) -> dict:
    """A valid export request of 1 to 40 items, some of whose fields are replaced by anything."""
    doc = json.loads(json.dumps(VALID[signal]))
    l1, l2, l3 = MEMBERS[signal]
    scope = doc[l1][0][l2][0]
    template = scope[l3][0]
    scope[l3] = [dict(template) for _ in range(draw(st.integers(1, 40)))]
    for member in draw(st.lists(st.sampled_from(scope[l3]), max_size=2)):
        for key in draw(st.lists(st.sampled_from(FIELDS[signal]), max_size=3, unique=True)):
            member[key] = draw(json_values)
    return doc


@st.composite
def batch_lines(draw) -> tuple[str, list[str]]:
    """The lines of a spool file: requests (often valid), torn ones, and any text."""
    signal = draw(st.sampled_from(sorted(VALID)))
    out = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            out.append(draw(st.text(max_size=80)).replace("\n", " "))
        else:
            text = json.dumps(draw(requests(signal)), allow_nan=True)
            out.append(text if kind > 1 else text[: draw(st.integers(0, len(text)))])
    return signal, out


@FUZZ
@given(st.binary(max_size=3000))
def test_the_spool_line_reader_never_raises_and_accounts_for_every_line(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("spool") / "batch.jsonl"
    path.write_bytes(data)
    reader = Requests(path)
    read = list(reader)
    assert all(isinstance(r, dict) for r in read)
    assert len(read) + reader.bad == sum(1 for line in data.split(b"\n") if line.strip())


@FUZZ
@given(batch_lines(), st.integers(1, 100))
def test_conversion_never_raises_and_skips_exactly_the_lines_it_cannot_convert(lines, limit):
    signal, texts = lines
    decoded = []
    for text in texts:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            decoded.append(value)
    convertible = [r for r in decoded if to_request(signal, [r], paced=False)[2] == 0]
    made = list(pieces(signal, decoded, paced=False, limit=limit))
    assert sum(bad for _, _, bad in made) == len(decoded) - len(convertible)
    largest = max((to_request(signal, [r], paced=False)[1] for r in convertible), default=0)
    assert all(items < limit + largest for _, items, _ in made)
    assert sum(items for _, items, _ in made) == sum(to_request(signal, [r], paced=False)[1] for r in convertible)
    whole = to_request(signal, decoded, paced=False)
    assert (whole[0] is None) == (not convertible)


@pytest.fixture(scope="module")
def receiver():
    with OTLPReceiver() as running:
        yield running


@settings(FUZZ, max_examples=100)  # a real send each: fewer examples, the same coverage of shapes
@given(batch_lines())
def test_re_sending_any_batch_file_never_raises_and_leaves_the_spool_consistent(tmp_path_factory, receiver, lines):
    signal, texts = lines
    spool = Spool(tmp_path_factory.mktemp("spool"), 1 << 30, 86400)
    url = f"{receiver.endpoint}/v1/{signal}"
    key = endpoint_key("http/protobuf", url)
    folder = spool.directory / signal
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(spool.directory, 0o700)
    (folder / f"{time.time_ns():019d}-1-1-{key}.jsonl").write_text("\n".join(texts) + "\n")
    before = receiver.request_count
    report = send_all(spool, {(signal, key): OTLPTarget(url, "http/protobuf", {}, 5.0, "none")})
    assert report.sent + report.unreadable + report.rejected == 1 and report.failed == 0
    assert spool.entries() == []  # sent (what could be) or removed as unreadable: never stuck
    assert (receiver.request_count > before) == (report.sent == 1)


KINDS = ["batch", "fifo", "link", "dir", "closed", "junk"]


@settings(FUZZ, max_examples=100)
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.booleans()), min_size=1, max_size=6))
def test_a_spool_holding_anything_is_listed_and_sent_without_blocking(tmp_path_factory, receiver, things):
    spool = Spool(tmp_path_factory.mktemp("spool"), 1 << 30, 86400)
    url = f"{receiver.endpoint}/v1/traces"
    key = endpoint_key("http/protobuf", url)
    folder = spool.directory / "traces"
    folder.mkdir(parents=True, mode=0o700)
    os.chmod(spool.directory, 0o700)
    outside = Path(tmp_path_factory.mktemp("outside")) / "target.jsonl"
    outside.write_text(json.dumps(VALID["traces"]) + "\n")
    expected_batches = 0
    for n, (kind, named_like_a_batch) in enumerate(things):
        name = f"{time.time_ns():019d}-1-{n}-{key}.jsonl" if named_like_a_batch else f"other-{n}"
        path = folder / name
        if kind in ("batch", "closed"):
            path.write_text(json.dumps(VALID["traces"]) + "\n")
            if kind == "closed":
                path.chmod(0)
            expected_batches += named_like_a_batch
        elif kind == "fifo":
            os.mkfifo(path, 0o600)
        elif kind == "link":
            path.symlink_to(outside)
        elif kind == "dir":
            path.mkdir()
        else:
            path.write_bytes(b"\x00\xff" * 10)
            expected_batches += named_like_a_batch
    entries, strays = within(10, spool.scan)
    assert len(entries) == expected_batches
    assert len(strays) == sum(1 for kind, named in things if named and kind in ("fifo", "link", "dir"))
    report = within(20, lambda: send_all(spool, {("traces", key): OTLPTarget(url, "http/protobuf", {}, 5.0, "none")}))
    assert report.busy == 0 and report.failed == 0
    assert outside.exists()  # a link is never followed, its target never removed
