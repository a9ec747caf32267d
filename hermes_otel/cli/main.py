"""`hermes-otel`: enable, disable, demo, view, cost, doctor, spool, config validate, config keys."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sys
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from .. import config, hermes_compat
from ..redaction import masking
from ..version import __version__
from . import enable, view
from .terminal import wants_color


def main(argv: Sequence[str] | None = None) -> int:
    masking.install()  # every library logger the commands can make talk (probes, exporters) is masked
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`hermes-otel doctor | head -3`): stop quietly, as other tools do. Point stdout at
        # /dev/null so that the interpreter's final flush does not raise again.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 141  # 128 + SIGPIPE, what a shell reports for a tool the pipe stopped
    except KeyboardInterrupt:
        # Ctrl-C (`spool send` against a hung collector): one line, no traceback; what was not sent stays spooled.
        print("hermes-otel: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, what a shell reports for a tool Ctrl-C stopped


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hermes-otel", description="OpenTelemetry for the Hermes Agent.")
    parser.add_argument("--version", action="version", version=f"hermes-otel {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    only = ("edit plugins.enabled / plugins.disabled of config.yaml with Hermes's own config functions, without "
            "running `hermes plugins` (whose 0.20+ package manager downloads a runtime)")
    switch = sub.add_parser("enable", help="enable the plugin in Hermes (any supported Hermes) and say how",
                            description="Add hermes_otel to Hermes's plugin allow-list (plugins.enabled of "
                            "$HERMES_HOME/config.yaml) with `hermes plugins enable hermes_otel "
                            "--no-allow-tool-override` and show what Hermes said. On 0.16 and 0.17, whose enable "
                            "command cannot see a plugin installed as a Python package, or with --config-only, with "
                            "Hermes's own config functions; says which. When Hermes refuses, nothing is changed. "
                            "Takes effect on the next session.")
    switch.add_argument("--config-only", action="store_true", help=only)
    switch = sub.add_parser("disable", help="disable the plugin in Hermes and say how",
                            description="Move hermes_otel from plugins.enabled to plugins.disabled of "
                            "$HERMES_HOME/config.yaml (`hermes plugins disable hermes_otel`, or Hermes's own config "
                            "functions where enable would use them) and remove the dashboard's Traces tab; says which. "
                            "Takes effect on the next Hermes session.")
    switch.add_argument("--config-only", action="store_true", help=only)

    demo = sub.add_parser("demo", help="run a real Hermes session against a scripted local model and show its trace")
    demo.add_argument("--keep", action="store_true", help="keep the temporary HERMES_HOME and its telemetry files")
    demo.add_argument("--ascii", action="store_true", help="ASCII-only waterfall")

    show = sub.add_parser("view", help="render traces from the embedded default files as a waterfall")
    show.add_argument("path", nargs="?", help="a traces.jsonl file or its directory (default: $HERMES_HOME/otel)")
    which = show.add_mutually_exclusive_group()
    which.add_argument("--trace", help="only this trace id (or a unique prefix of it)")
    which.add_argument("--last", type=_positive, default=None,
                       help=f"the N newest traces (default {VIEW_DEFAULT_LAST})")
    which.add_argument("--follow", action="store_true",
                       help="show each turn's waterfall as it ends, across file rotation, until Ctrl-C")
    show.add_argument("--ascii", action="store_true", help="ASCII-only output")
    show.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    show.add_argument("--width", type=view.width, default=None,
                      help=f"columns ({view.MIN_WIDTH} to {view.MAX_WIDTH}; default: the terminal's)")

    from . import cost_report

    spent = sub.add_parser(
        "cost", help="what the recorded runs cost, by session, turn, model, profile, subagent or day")
    cost_report.add_arguments(spent)

    sub.add_parser("doctor", help="check installation, enablement, configuration and endpoints",
                   description="Check the installation, the enablement in Hermes, the configuration (plugins.toml and "
                   "OTEL_* variables), every endpoint (a real, empty export to each), the output directories and the "
                   "spool, and say what the runtime will do; then print the effective settings, secrets masked. Exit "
                   "status 1 when a check fails. Reads nothing it could hang on and writes nothing.")

    from . import spool as spool_cli

    spool_cli.add_parser(sub)

    cfg = sub.add_parser("config", help="configuration tools")
    cfg_sub = cfg.add_subparsers(dest="config_command", required=True)
    validate = cfg_sub.add_parser("validate", help="validate a plugins.toml (default: the one hermes-otel would load)",
                                  description="Validate a plugins.toml: every problem with its key, what was expected "
                                  "and what was found. Without FILE, the file hermes-otel would load "
                                  "(HERMES_OTEL_PLUGINS_TOML, else HERMES_NEMO_RELAY_PLUGINS_TOML, else "
                                  "$HERMES_HOME/plugins.toml). Exit status 1 when the file would be ignored.")
    validate.add_argument("file", type=Path, nargs="?", help="the file (default: the one hermes-otel would load)")
    cfg_sub.add_parser("keys", help="every configuration key: type, default, variable, meaning")

    args = parser.parse_args(argv)
    if args.command in ("enable", "disable"):
        return getattr(enable, args.command)(config_only=args.config_only)
    if args.command == "demo":
        from . import demo as demo_cmd

        return demo_cmd.run(keep=args.keep, ascii=args.ascii)
    if args.command == "view":
        return cmd_view(args)
    if args.command == "cost":
        return cost_report.run(args, _cost_sources)
    if args.command == "doctor":
        return cmd_doctor()
    if args.command == "spool":
        return spool_cli.run(args)
    if args.config_command == "keys":
        return cmd_keys()
    return cmd_validate(args.file if args.file is not None else _file_to_validate())


# -- view --------------------------------------------------------------------


def _default_otel_dir() -> Path:
    return config.load_settings().settings.file_directory


def _cost_sources() -> list[Path]:
    settings = config.load_settings().settings
    return [settings.file_directory, settings.spool_directory / "traces"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}")
    return value


VIEW_DEFAULT_LAST = 5


def cmd_view(args: argparse.Namespace) -> int:
    path = Path(args.path).expanduser() if args.path else _default_otel_dir()
    shown_path = masking.printable(str(path))
    if not path.exists():
        print(f"hermes-otel view: {shown_path} does not exist (no run has written telemetry there yet)",
              file=sys.stderr)
        return 1
    color = wants_color(args.color)
    width = args.width or shutil.get_terminal_size((120, 24)).columns
    if args.follow:
        return view.follow(path, width=width, color=color, ascii=args.ascii)
    last = args.last or VIEW_DEFAULT_LAST
    try:
        reading = view.read_traces(path, trace_id=args.trace, last=last)
    except view.ViewError as exc:
        print(f"hermes-otel view: {exc}", file=sys.stderr)
        return 2 if exc.usage else 1
    except OSError as exc:
        print(f"hermes-otel view: cannot read {shown_path} ({exc.strerror or exc})", file=sys.stderr)
        return 1
    if reading.bad_lines:
        print(f"hermes-otel view: skipped {reading.bad_lines} unreadable line(s) of {reading.lines_read} in "
              f"{shown_path} (not OTLP/JSON trace requests)", file=sys.stderr)
    if not reading.traces:
        what = f"no trace starts with {args.trace.strip().lower()!r}" if args.trace else "no traces"
        print(f"hermes-otel view: {what} in {shown_path}", file=sys.stderr)
        return 1
    sys.stdout.write(view.render(reading.traces, width=width, color=color, ascii=args.ascii))
    if not args.trace and not reading.complete:
        print(f"hermes-otel view: the {len(reading.traces)} newest traces; --last N for more, --trace ID for one",
              file=sys.stderr)
    return 0


# -- doctor ------------------------------------------------------------------


class _Report:
    """One line per check; text from configuration or data is shown with control characters escaped."""

    def __init__(self) -> None:
        self.failed = False

    def ok(self, text: str) -> None:
        print(f"  ok    {masking.printable(text)}")

    def warn(self, text: str) -> None:
        print(f"  warn  {masking.printable(text)}")

    def fail(self, text: str) -> None:
        self.failed = True
        print(f"  FAIL  {masking.printable(text)}")

    def note(self, text: str) -> None:
        print(f"  note  {masking.printable(text)}")


def cmd_doctor() -> int:
    from importlib import metadata

    report = _Report()
    env = os.environ
    home = config.hermes_home(env)
    print(f"hermes-otel {__version__} doctor (HERMES_HOME={home})")
    installed = hermes_compat.distribution()
    if installed is None:
        names = " nor ".join(hermes_compat.DISTRIBUTIONS)
        report.fail(f"Hermes is not installed in this environment (neither {names})")
    else:
        name, hermes_version = installed
        support = enable.support(hermes_version, name)
        (report.ok if support.ok else report.warn)(support.text)
        for level, text in compat_lines(hermes_compat.check(hermes_version)):
            getattr(report, level)(text)
    hermes_config = _read_hermes_config(report, home)
    if installed is not None:
        for text in hermes_compat.degraded(hermes_config or {}):  # the config as read: Hermes's reader makes a home
            report.warn(f"degraded on this Hermes: {text}")
    entry_points = [ep for ep in metadata.entry_points(group="hermes_agent.plugins") if ep.name == "hermes_otel"]
    directory_plugin = home / "plugins" / "hermes_otel" / "plugin.yaml"
    if entry_points or directory_plugin.exists():
        report.ok("plugin discoverable " + ("(entry point)" if entry_points else f"({directory_plugin.parent})"))
    else:
        report.fail("plugin not discoverable: no `hermes_agent.plugins` entry point and no directory plugin")
    _check_enabled(report, home, env, hermes_config)
    from ..tab import install as tab

    level, text = tab.status(home)
    getattr(report, level)(text)
    result = config.load_settings(env)
    for problem in result.problems:
        if problem.ignored:
            report.note(f"config (ignored, as [policy] says): {problem}")
        else:
            (report.fail if problem.fatal else report.warn)(f"config: {problem}")
    from .._internal import propagation

    for name, why in propagation.problems(env):
        report.warn(f"{propagation.VARIABLE} names the propagator {name!r}, which cannot be used ({why}): it is left "
                    "out, the others and all telemetry go on")
    if result.file_rejected:
        report.fail(f"{result.path} is ignored: telemetry runs on the environment and defaults")
    elif not any(not p.ignored for p in result.problems):
        report.ok(f"configuration valid ({result.path or 'no plugins.toml; environment and defaults'})")
    settings = result.settings
    if settings.backend:
        report.ok(_preset_line(settings))
    if not settings.enabled:
        report.warn("telemetry is disabled (OTEL_SDK_DISABLED or the component's enabled = false)")
    else:
        _check_runtime(report, settings)
    print("effective settings (secrets masked):")
    print(masking.printable(json.dumps(masking.masked(settings), indent=2), lines=True))
    return 1 if report.failed else 0


def compat_lines(checked: hermes_compat.Check) -> list[tuple[str, str]]:
    """(level, text) for doctor: the Hermes private names hermes-otel could not find, and on a release it does
    not know, what it turns off (pricing, which could reach the network some new way)."""
    lines = []
    if not checked.known:
        lines.append(("warn", f"hermes-agent {checked.version} is a release hermes-otel has not been tested with: "
                              "tracing and pricing use what they find"))
    if checked.missing:
        lines.append(("warn", f"Hermes private names hermes-otel could not find: {', '.join(checked.missing)} "
                              "(what needs them is off or falls back; hermes_compat/)"))
    else:
        lines.append(("ok", "every Hermes private name hermes-otel uses was found"))
    return lines


def _preset_line(settings: config.Settings) -> str:
    """What the backend preset set: where each signal goes, the header names (never their values), the flavour."""
    from ..config import presets

    preset = presets.PRESETS[settings.backend]
    routes = ", ".join(f"{signal} -> {masking.mask_url(target.endpoint)}" for signal, target in settings.otlp.items())
    names = sorted({name for target in settings.otlp.values() for name in target.headers})
    return (f"backend preset {preset.name} ({preset.title}): {routes or 'no endpoint'}; headers: "
            f"{', '.join(names) or 'none'}; attributes: {preset.flavour}; docs: {preset.docs}")


def _check_runtime(report: _Report, settings: config.Settings) -> None:
    """The checks the runtime makes, with what it will do: endpoints answer, files can be written, fallbacks."""
    from concurrent.futures import ThreadPoolExecutor

    from . import probe

    plan = settings
    if settings.relay_handoff:
        plan = _check_handoff(report, settings)
    checks: list[tuple[str, str, object, bool]] = []  # (label, consequence, probe call, a fault if it fails)
    spooled: set[int] = set()  # the checks of OTLP endpoints: what they cannot take goes to the spool
    for signal, target in plan.otlp.items():
        label = f"{signal} endpoint {masking.mask_url(target.endpoint)} ({target.protocol})"
        if target.protocol == "grpc" and probe.grpc_missing():  # the runtime writes files instead, as it says
            checks.append((label, f"{signal} will be written to files under {plan.file_directory} instead",
                           _otlp_probe(signal, target), True))
            continue
        spooled.add(len(checks))
        checks.append((label, f"{signal} will be dropped", _otlp_probe(signal, target), True))
    for endpoint in plan.relay_span_endpoints:
        target = endpoint.target
        spooled.add(len(checks))
        checks.append((f"observability endpoint ({endpoint.type}) {masking.mask_url(target.endpoint)} "
                       f"({target.protocol})", "spans for it will be dropped", _otlp_probe("traces", target), True))
    for signal, targets in (("logs", plan.relay_log_targets), ("metrics", plan.relay_metric_targets)):
        for target in targets:
            spooled.add(len(checks))
            checks.append((f"observability {signal} endpoint {masking.mask_url(target.endpoint)}",
                           f"{signal} for it will be dropped", _otlp_probe(signal, target), True))
    for sink in plan.atof_sinks:
        if hasattr(sink, "url"):
            headers = sink.resolved_headers()
            checks.append((f"ATOF stream sink {sink.name!r} {masking.mask_url(sink.url)} ({sink.transport})",
                           "its events will be dropped",
                           lambda s=sink, h=headers: probe.atof_stream(s.url, s.transport, h), True))
    health = _health_check_url(plan)
    if health is not None:
        url, configured = health
        consequence = ("check the Collector's logs" if configured
                       else "no health_check there; set collector.health_check to your Collector's")
        checks.append((f"Collector health_check {masking.mask_url(url)}", consequence,
                       lambda: probe.health_check(url), configured))
    with ThreadPoolExecutor(max_workers=8) as pool:  # all at once: a dead endpoint costs its timeout once
        answers = list(pool.map(lambda check: check[2](), checks))
    waits = _spool_waits(settings)
    for n, ((label, consequence, _, required), answer) in enumerate(zip(checks, answers, strict=True)):
        if n in spooled and answer.kept and waits:  # the spool keeps what it cannot take: say so, not "dropped"
            consequence = consequence.replace(" will be dropped", waits).replace(" for it ", " ")
        if answer.ok:
            report.ok(f"{label}: {answer.text}")
        elif not required:  # a guess at where a health_check might be: not finding one is news, not a fault
            report.note(f"{label}: {answer.text}: {consequence}")
        else:
            report.fail(f"{label}: {answer.text}: {consequence}")
    files = ("traces.jsonl", "logs.jsonl", "metrics.jsonl")
    if settings.file_signals:
        _check_dir(report, "file export directory", settings.file_directory, files,
                   "no telemetry files will be written")
    for sink in plan.atof_sinks:
        if hasattr(sink, "output_directory"):
            _check_dir(report, f"ATOF file sink {sink.name!r} directory", Path(sink.output_directory).expanduser(),
                       (sink.filename,), "the sink will not start")
    if "prometheus" in settings.metrics_exporters:
        _check_prometheus(report, settings)
    from . import spool as spool_cli

    for level, text in spool_cli.doctor_lines(plan):
        getattr(report, level)(text)


def _spool_waits(settings: config.Settings) -> str:
    """' wait in the spool … once it takes them' when the spool can keep what an endpoint cannot take, else ''."""
    from ..exporters.private import problem
    from .spool import _age, _size

    directory = settings.spool_directory
    if not settings.spool_enabled or problem(directory, ()):
        return ""
    return (f" wait in the spool {directory} ({_size(settings.spool_max_bytes)}, {_age(settings.spool_max_age_s)} "
            "at most) and are re-sent once it takes them")


def _health_check_url(settings: config.Settings) -> tuple[str, bool] | None:
    """(the Collector's health_check URL, whether it was configured), else a guess from the OTLP endpoint's host."""
    if settings.collector_health_check:
        return settings.collector_health_check, True
    target = settings.otlp.get("traces") or next(iter(settings.otlp.values()), None)
    if target is None:
        return None
    host = urllib.parse.urlsplit(target.endpoint if "://" in target.endpoint else f"http://{target.endpoint}").hostname
    if not host:
        return None
    return f"http://{f'[{host}]' if ':' in host else host}:13133/", False


def _otlp_probe(signal: str, target: config.OTLPTarget):
    from . import probe

    if target.protocol == "grpc":
        return lambda: probe.otlp_grpc(target.endpoint, signal, target.headers)
    return lambda: probe.otlp_http(target.endpoint, target.headers)


def _check_dir(report: _Report, label: str, directory: Path, names: tuple[str, ...], consequence: str) -> None:
    from ..exporters.private import problem

    why = problem(directory, names)
    if why:
        report.fail(f"{label} {directory} {why}: {consequence}")
    elif directory.is_dir():
        report.ok(f"{label} {directory} is ours and writable")
    else:
        report.ok(f"{label} {directory} will be created (0700)")


def _check_handoff(report: _Report, settings: config.Settings) -> config.Settings:
    """What `relay_handoff` will do; returns the settings our own exporters will run with."""
    import dataclasses

    if not settings.relay_component:
        report.warn("relay_handoff = true has no effect: the document has no observability component")
        return settings
    try:
        import nemo_relay  # noqa: F401 - what the runtime imports for the hand-off
    except ImportError:
        report.warn("relay_handoff = true but the nemo-relay package is not installed: hermes-otel's own ATOF sinks "
                    "and observability endpoints run instead")
        return settings
    report.ok("relay_handoff: NeMo Relay's runtime will own the observability component (its ATOF, ATIF and OTLP "
              "exporters; ours stand down)")
    return dataclasses.replace(settings, relay_span_endpoints=(), relay_log_targets=(), relay_metric_targets=(),
                               atof_sinks=())


def _check_prometheus(report: _Report, settings: config.Settings) -> None:
    """The runtime's two conditions for a pull endpoint: the extra imports, and the address can be bound."""
    where = f"{settings.prometheus_host}:{settings.prometheus_port}"
    fallback = "metrics will be pushed (OTLP or files) instead"
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: F401
        from prometheus_client import CollectorRegistry  # noqa: F401
    except ImportError:
        report.warn("metrics.exporter = prometheus needs the prometheus extra "
                    f"(`hermes-otel[prometheus]`), which is not installed: {fallback}")
        return
    try:
        socket.create_server((settings.prometheus_host, settings.prometheus_port)).close()
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        report.warn(f"Prometheus endpoint {where} cannot be served ({reason}; a running Hermes may hold "
                    f"it): a new Hermes process would find it taken and {fallback}")
        return
    report.ok(f"Prometheus endpoint http://{where}/metrics can be served")


def _read_hermes_config(report: _Report, home: Path) -> dict | None:
    """Hermes's config.yaml as data (an empty one when there is none), or None (said) when it cannot be read."""
    from ..config.files import MAX_CONFIG_BYTES, Unreadable, read_regular

    cfg_file = home / "config.yaml"
    try:
        yaml = hermes_compat.yaml_module()
        # Hermes's own config: read like ours (regular files only, never blocking: a FIFO must not hang doctor).
        text = read_regular(cfg_file, MAX_CONFIG_BYTES).decode("utf-8") if os.path.lexists(cfg_file) else ""
        data = yaml.safe_load(text) or {}
    except Unreadable as exc:
        report.fail(f"cannot read {cfg_file}: {exc}")
        return None
    except Exception as exc:  # noqa: BLE001 - report, don't crash
        report.fail(f"cannot read {cfg_file}: {masking.mask_text(str(exc))[:300]}")
        return None
    return data if isinstance(data, dict) else {}


def _check_enabled(report: _Report, home: Path, env, data: dict | None) -> None:
    if env.get("HERMES_SAFE_MODE", "").strip().lower() in ("1", "true", "yes", "on"):
        report.fail("HERMES_SAFE_MODE is set: Hermes loads no plugins")
    if data is None:  # unreadable: said already
        return
    cfg_file = home / "config.yaml"
    plugins = data.get("plugins")
    enabled = plugins.get("enabled") if isinstance(plugins, dict) else None
    disabled = plugins.get("disabled") if isinstance(plugins, dict) else None
    if isinstance(disabled, list) and "hermes_otel" in disabled:
        report.fail(f"hermes_otel is in plugins.disabled of {cfg_file}")
    elif isinstance(enabled, list) and "hermes_otel" in enabled:
        report.ok(f"enabled in {cfg_file}")
    else:
        report.fail("not enabled: run `hermes-otel enable`")


# -- config validate -----------------------------------------------------------


def _file_to_validate() -> Path | None:
    return config.find_config_file(os.environ)


def cmd_validate(path: Path | None) -> int:
    if path is None:
        where = config.hermes_home(os.environ) / "plugins.toml"
        print(masking.printable(f"hermes-otel config validate: no plugins.toml to validate (HERMES_OTEL_PLUGINS_TOML "
                                f"and HERMES_NEMO_RELAY_PLUGINS_TOML are unset and {where} does not exist): "
                                "hermes-otel runs on the environment and defaults"))
        return 0
    values, problems = config.read_component(path)
    for problem in problems:
        label = "ignored" if problem.ignored else "error" if problem.fatal else "warning"
        print(f"{label}: {problem}" + (" ([policy] says ignore)" if problem.ignored else ""))
    shown_path = masking.printable(str(path))
    if any(p.fatal for p in problems):
        print(f"{shown_path}: invalid: hermes-otel ignores this file and runs on environment and defaults "
              f"({config.KEYS_HINT})")
        return 1
    print(f"{shown_path}: valid; {config.summary(values)}")
    return 0


def cmd_keys() -> int:
    from ..config import relay, schema

    print("plugins.toml: [[components]] kind = \"hermes_otel\", keys of [components.config]")
    print("(dotted keys are sub-tables: otlp.endpoint is [components.config.otlp] endpoint = ...)\n")
    for spec in schema.FIELDS:
        print(_key_line(spec))
    print("\nplugins.toml: [[components]] kind = \"observability\" (NeMo Relay's), the parts hermes-otel honours\n")
    for table, fields in relay.TABLES:
        print(table)
        for spec in fields:
            print(_key_line(spec))
    print("\nAlso read: OTEL_EXPORTER_OTLP_{TRACES,LOGS,METRICS}_{ENDPOINT,PROTOCOL,HEADERS,TIMEOUT,COMPRESSION}, "
          "OTEL_SDK_DISABLED, HERMES_HOME, HERMES_OTEL_PLUGINS_TOML, HERMES_NEMO_RELAY_PLUGINS_TOML.")
    return 0


def _key_line(spec) -> str:
    from ..config.problems import number, type_name

    default = "" if spec.default in (None, "", {}, []) else f"  default {json.dumps(spec.default)}"
    env = f"  env {spec.env}" if spec.env else ""
    allowed = f"  one of {' | '.join(spec.choices)}" if spec.choices else ""
    if spec.minimum is not None or spec.maximum is not None:
        low = "" if spec.minimum is None else number(spec.minimum)
        high = "" if spec.maximum is None else number(spec.maximum)
        allowed += f"  range {low}..{high}"
    return f"  {spec.key}  ({type_name(spec.type)}){default}{env}{allowed}\n      {spec.doc}"


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
