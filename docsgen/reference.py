"""Generate the reference pages in docs/ from the code (`python -m docsgen.reference [DIR]`)."""

from __future__ import annotations

import sys
from pathlib import Path

from docsgen.catalog import telemetry_markdown
from hermes_otel.config.problems import number
from hermes_otel.config.relay import TABLES
from hermes_otel.config.schema import COMPONENT_KIND, FIELDS, POLICY_VALUES, Field

_PRECEDENCE = """\
## Precedence

Lowest to highest:

1. built-in defaults (below);
2. the `{kind}` component of `plugins.toml`;
3. the standard `OTEL_*` environment variables — per-signal forms
   (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, ...) beat the general ones;
4. `OTEL_SDK_DISABLED=true` always turns telemetry off.

The environment wins over the file because it is the per-deployment override
(a container, a CI job, one shell), while the file is shared configuration.

## Where the file is found

`HERMES_OTEL_PLUGINS_TOML`, else `HERMES_NEMO_RELAY_PLUGINS_TOML`, else
`$HERMES_HOME/plugins.toml` (when it exists). The document uses NeMo Relay's
component format: top-level `version`, `[policy]`, `[[components]]`. Our
settings live in the component of kind `{kind}`; of Relay's own kinds,
`observability` is honoured (below) and the others are recognised and left to
their readers.

The file, and every `header_file`, is read only if it is a regular file
(a FIFO, a device or a directory is refused without blocking), of at most
1 MiB (a header file: 64 KiB), and only if no other user can change it: a
file owned by another user or writable by others (`o+w`) is refused with one
message (`expected a file only this user can change …`), since whoever can
write the file decides where your credentials and telemetry are sent. A
refused `plugins.toml` applies nothing (telemetry runs on the environment and
defaults); a refused `header_file` leaves that header out.

## The exporter variables

`OTEL_TRACES_EXPORTER`, `OTEL_LOGS_EXPORTER` and `OTEL_METRICS_EXPORTER` are read as the
specification defines them: a comma-separated list of `otlp`, `console` and `none`
(`prometheus` too, for metrics). `otlp` is the OTLP endpoint when one is set and the local
files (the traces file always, the others when their signal has no endpoint); `console`
prints the SDK's JSON on stderr (stdout is Hermes's); `none` sends that signal nowhere, no
file included. An exporter we do not have (`zipkin`, `otlp_proto_http`) is reported once by
name and `otlp` is used. The log processor's `OTEL_BLRP_*` variables are honoured and default
to the span processor's settings (`batch.*`, `OTEL_BSP_*`). We check these variables ourselves
and hand the SDK explicit values: its own reading logs a stack trace for a value that is not a
number and raises when an export batch is larger than its queue, where ours says the variable
once and keeps the default (or clamps the batch).

## Problems

A broken file never stops Hermes. Every problem is reported in ONE log
message naming the file, the key path, what was expected and what was found,
e.g. `plugins.toml: components[0].config.otlp.timeout_millis: expected an
integer, found string 'soon'`. A value under a key that holds credentials
(`headers`) is never shown: a table by its keys, anything else by its kind.

* A TOML syntax error (or tables nested too deep to read), a wrong type, or a
  problem that `[policy]` rates `error`: the whole file is ignored; telemetry
  continues with the environment and the defaults (logged at ERROR) — except
  that `enabled = false` in the `{kind}` component is still obeyed.
* A problem rated `warn`: the offending key is ignored, the rest applies
  (logged at WARNING). `ignore`: not logged, but `config validate` and `doctor`
  still list it.

`[policy]` keys (values `{policies}`): `unknown_component` (default `warn`),
`unknown_field` (default `warn`), `unsupported_value` (a value outside the
allowed set or range; default `error`).

Every `OTEL_*` value we read — the per-signal forms too — is checked like a
key of the file (type, range, choices; URLs must be `http(s)://host[:port]`
with a port from 1 to 65535). A bad one is reported once, by variable name,
and only that setting keeps its default. Header values (from the file, a
variable or a header file) lose surrounding blanks and one trailing newline;
one that still holds a control character is refused, by key, never shown.
`OTEL_SDK_DISABLED` is read as the OpenTelemetry SDK reads it: only `true`
(any case) turns telemetry off; any other value but `false` (`1`, `yes`, `on`
included) is reported and read as false. `OTEL_RESOURCE_ATTRIBUTES` merges key
by key over the file's `resource_attributes` (and `OTEL_SERVICE_NAME` over
both): a variable that names one key leaves the file's others in place.

`hermes-otel config keys` prints every key below. Check a file with
`hermes-otel config validate [FILE]` (it also says what the file configures;
without FILE, the file hermes-otel would load), the whole set-up with
`hermes-otel doctor`. An unknown key is reported with the nearest documented
one when there is one (`otlp.protocl`: did you mean `otlp.protocol`?).
"""


def configuration_markdown() -> str:
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m docsgen.reference`; do not edit by hand. -->",
        "",
        _PRECEDENCE.format(kind=COMPONENT_KIND, policies=" | ".join(POLICY_VALUES)),
        "## Keys of `[components.config]`",
        "",
        "Dotted keys are sub-tables: `otlp.endpoint` is `[components.config.otlp] endpoint = ...`",
        "(or an inline table `otlp = { endpoint = ... }`).",
        "",
        "| key | type | default | variable | meaning |",
        "|---|---|---|---|---|",
    ]
    for field in FIELDS:
        env = f"`{field.env}`" if field.env else ""
        out.append(f"| `{field.key}` | {_kind(field.type)} | {_default(field.default)} | {env} | {_doc(field)} |")
    out += [
        "",
        "## NeMo Relay's `observability` component",
        "",
        "What hermes-otel honours of it (the component is also handed, verbatim, to Relay's runtime with",
        "`relay_handoff`). Its `config` takes `version = 4`, `enable_full_payloads`, `atof` (`enabled`, `sinks`)",
        "and `opentelemetry` (`enabled`, `endpoints`, `logs`, `metrics`).",
        "",
    ]
    for table, fields in TABLES:
        out += [f"`{table}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        out += [f"| `{f.key}` | {_kind(f.type)} | {_default(f.default)} | {_doc(f)} |" for f in fields]
        out.append("")
    out += [
        "Also honoured: `OTEL_EXPORTER_OTLP_{TRACES,LOGS,METRICS}_{ENDPOINT,PROTOCOL,HEADERS,TIMEOUT,COMPRESSION}`",
        "(per-signal endpoints are used as given; the general endpoint gets `/v1/<signal>` appended for",
        "http/protobuf), `OTEL_SDK_DISABLED`, and `HERMES_HOME` (the default file directory is",
        "`$HERMES_HOME/otel`). `OTEL_EXPORTER_OTLP_TIMEOUT` is in milliseconds, as the specification says.",
        "",
        "## The embedded default",
        "",
        "With no OTLP endpoint for a signal, that signal is written to `traces.jsonl`, `logs.jsonl` or",
        "`metrics.jsonl` under `file.directory`: one OTLP/JSON export request per line, the encoding the",
        "Collector's `otlp_json_file` receiver reads. `traces.jsonl` is written beside an endpoint too: it is the",
        "local record that `hermes-otel view`, `hermes-otel cost` and the dashboard's Traces tab read",
        "([cost per call](performance.md#the-local-record-beside-an-endpoint)); `file.enabled = false` turns every",
        "file off. Files are rotated at `file.max_bytes` keeping",
        "`file.backups` old files (`traces.jsonl.<n>`, numbered upwards: the highest is the newest), created 0600",
        "in a 0700 directory; several processes may share them (rotation takes a lock, `.traces.jsonl.lock`).",
        "",
        "## The spool",
        "",
        "What an OTLP endpoint cannot take is kept under `$HERMES_HOME/otel/spool/<signal>/` (one batch per",
        "file, the same OTLP/JSON lines) and re-sent later, within `spool_max_mb` and `spool_max_age`; see",
        "[reliability](reliability.md). `spool = false` turns it off.",
        "",
    ]
    return "\n".join(out)


def _kind(t: type) -> str:
    return {str: "string", int: "integer", float: "number", bool: "boolean", dict: "table", list: "array"}.get(
        t, getattr(t, "__name__", str(t)))


def _default(value: object) -> str:
    return "(none)" if value in (None, "", {}, []) else f"`{value!r}`".replace("'", '"')


def _doc(field: Field) -> str:
    doc = field.doc
    if field.choices:
        doc += (" One or more, comma-separated, of " if field.several else " One of ") + ", ".join(
            f"`{c}`" for c in field.choices) + ("; `none` only alone." if field.several else ".")
    if field.minimum is not None:
        doc += f" At least {number(field.minimum)}."
    if field.maximum is not None:
        doc += f" At most {number(field.maximum)}."
    if field.secret:
        doc += " Values are never logged or shown (`doctor` masks them)."
    return doc


_PRESETS_START, _PRESETS_END = "<!-- presets:start (generated) -->", "<!-- presets:end -->"


def presets_table() -> str:
    """The backend presets, from config/presets.py: one row each."""
    from hermes_otel.config import presets

    rows = ["| `backend` | for | endpoint from (default) | signals | headers | resource | attributes | docs |",
            "|---|---|---|---|---|---|---|---|"]
    for p in presets.PRESETS.values():
        var = p.endpoint_env[0]
        where = " or ".join(f"`{v}`" + ("†" if v in p.ours else "") for v in p.endpoint_env)
        if p.endpoint_template != "{}":
            where = f"`{p.endpoint_template.format('$' + var)}`"
        where += f" (`{p.endpoint}`)" if p.endpoint else " (none)"
        if p.path:
            where += f", then `{p.path}`"
        headers = "<br>".join(h.describe() for h in p.headers) or "none"
        resource = "<br>".join(f"`{a}` = `${v}`" + ("†" if v in p.ours else "") for a, v, _ in p.resource) or "none"
        docs = f"[{'unverified' if not p.verified else 'OTLP'}]({p.docs})"
        rows.append(f"| `{p.name}` | {p.title} | {where} | {', '.join(p.signals)} | {headers} | {resource} | "
                    f"`{p.flavour}` | {docs} |")
    notes = [f"* `{p.name}`: {p.note}" for p in presets.PRESETS.values() if p.note]
    return "\n".join(rows + [""] + notes) + "\n"


def backends_markdown() -> str:
    """docs/backends.md with its presets table regenerated (the rest of the page is written by hand)."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "backends.md").read_text(encoding="utf-8")
    before, rest = text.split(_PRESETS_START, 1)
    after = rest.split(_PRESETS_END, 1)[1]
    return f"{before}{_PRESETS_START}\n{presets_table()}{_PRESETS_END}{after}"


PAGES = {"configuration.md": configuration_markdown, "telemetry.md": telemetry_markdown,
         "backends.md": backends_markdown}


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, render in PAGES.items():
        path = directory / name
        path.write_text(render(), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover
    for path in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")):
        print(f"wrote {path}")
