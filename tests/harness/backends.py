"""Real backends on loopback for the live tests: Prometheus (Debian package) and Arize Phoenix (PyPI).

`make backends` fetches both into .cache/ (or $HERMES_OTEL_BACKENDS); a missing one is a
test FAILURE naming the command to run, never a skip. Ports are chosen at runtime.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("HERMES_OTEL_BACKENDS") or ROOT / ".cache")


def binary(relative: str) -> Path:
    path = CACHE / relative
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make backends` (fetches Prometheus and Phoenix into {CACHE})",
                    pytrace=False)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 10) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def wait_until(check: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen | None = None,
               log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            result = check()
            if result:
                return result
        except OSError:
            pass
        time.sleep(0.25)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    pytest.fail(f"{what} not ready within {timeout:.0f}s\n{tail}", pytrace=False)


class _Process:
    """A server process of ours, logged to a file, stopped by its own pid."""

    def __init__(self, name: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"hermes-otel-{name}-"))
        self.log = self.dir / "log"
        self.proc: subprocess.Popen | None = None

    def _start(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dir)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Prometheus(_Process):
    """Prometheus scraping one target every second (and evaluating `rules`, name -> rules file text)."""

    def __init__(self, target: str, rules: dict[str, str] | None = None) -> None:
        super().__init__("prometheus")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        for name, text in (rules or {}).items():
            (self.dir / name).write_text(text)
        rule_files = "".join(f"  - {self.dir / name}\n" for name in rules or {})
        (self.dir / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            + (f"rule_files:\n{rule_files}" if rule_files else "")
            + f"scrape_configs:\n  - job_name: hermes\n    static_configs:\n      - targets: ['{target}']\n"
        )

    def start(self) -> Prometheus:
        self._start([
            str(binary("prometheus/usr/bin/prometheus")), f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
        ])
        wait_until(lambda: urllib.request.urlopen(f"{self.url}/-/ready", timeout=2).status == 200, 30,
                   "Prometheus", self.proc, self.log)
        return self

    def query(self, expr: str, **params: str) -> list[dict]:
        query = urllib.parse.urlencode({"query": expr, **params})
        reply = get_json(f"{self.url}/api/v1/query?{query}")
        assert reply["status"] == "success", reply
        return reply["data"]["result"]

    def reload_rules(self, name: str, text: str) -> None:
        """Replace a rules file and have Prometheus reload it (SIGHUP to the server we started)."""
        import signal

        (self.dir / name).write_text(text)
        assert self.proc is not None and self.proc.poll() is None
        def loaded() -> tuple:
            info = get_json(f"{self.url}/api/v1/status/runtimeinfo")["data"]
            return info["lastConfigTime"], info["reloadConfigSuccess"]

        before = loaded()
        time.sleep(1.1)  # lastConfigTime has a resolution of one second
        self.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: (now := loaded()) != before and now[1], 30, "Prometheus reloading its rules", self.proc,
                   self.log)

    def alerts(self) -> dict[str, str]:
        """Active alerts: name -> state (`pending` or `firing`)."""
        reply = get_json(f"{self.url}/api/v1/alerts")
        assert reply["status"] == "success", reply
        return {a["labels"]["alertname"]: a["state"] for a in reply["data"]["alerts"]}

    def rules(self) -> list[dict]:
        reply = get_json(f"{self.url}/api/v1/rules")
        assert reply["status"] == "success", reply
        return [rule for group in reply["data"]["groups"] for rule in group["rules"]]


class Phoenix(_Process):
    """Arize Phoenix in its own venv (never the project's), OTLP/HTTP and REST on one port."""

    def __init__(self) -> None:
        super().__init__("phoenix")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def otlp_traces(self) -> str:
        return f"{self.url}/v1/traces"

    def start(self) -> Phoenix:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
        env.update(
            PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(self.port), PHOENIX_GRPC_PORT=str(free_port()),
            PHOENIX_WORKING_DIR=str(self.dir / "work"), PHOENIX_TELEMETRY_ENABLED="false",
        )
        self._start([str(binary("phoenix-venv/bin/phoenix")), "serve"], env)
        wait_until(lambda: urllib.request.urlopen(f"{self.url}/healthz", timeout=2).status == 200, 120,
                   "Phoenix", self.proc, self.log)
        return self

    def spans(self, project: str = "default") -> list[dict]:
        out, cursor = [], None
        while True:
            query = {"limit": "1000", **({"cursor": cursor} if cursor else {})}
            page = get_json(f"{self.url}/v1/projects/{project}/spans?{urllib.parse.urlencode(query)}")
            out += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def session(self, session_id: str) -> dict:
        return get_json(f"{self.url}/v1/sessions/{urllib.parse.quote(session_id, safe='')}")["data"]


class MLflow(_Process):
    """An MLflow tracking server in its own venv (`make backends`): OTLP/HTTP traces at /v1/traces (the experiment
    in the `x-mlflow-experiment-id` header), read back through its REST API. It runs uvicorn as a child: both are
    started in a process group of their own and stopped together, by that group's id."""

    def __init__(self) -> None:
        super().__init__("mlflow")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> MLflow:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MLFLOW_"))}
        argv = [str(binary("mlflow-venv/bin/mlflow")), "server", "--host", "127.0.0.1", "--port", str(self.port),
                "--backend-store-uri", f"sqlite:///{self.dir / 'mlflow.db'}", "--workers", "1"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dir,
                                         start_new_session=True)
        wait_until(lambda: urllib.request.urlopen(f"{self.url}/health", timeout=2).status == 200, 120,
                   "MLflow", self.proc, self.log)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server and its uvicorn child: our own group
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def traces(self, experiment_id: str = "0") -> list[dict]:
        """Trace infos of an experiment (MLflow's v3 search)."""
        body = json.dumps({"locations": [{"type": "MLFLOW_EXPERIMENT",
                                          "mlflow_experiment": {"experiment_id": experiment_id}}]}).encode()
        request = urllib.request.Request(f"{self.url}/api/3.0/mlflow/traces/search", data=body,
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10) as reply:
            return json.loads(reply.read()).get("traces", [])

    def spans(self, trace_id: str) -> list[dict]:
        """The spans of one trace as MLflow stored them (attribute values are JSON text)."""
        query = urllib.parse.urlencode({"request_id": trace_id})
        return get_json(f"{self.url}/ajax-api/3.0/mlflow/get-trace-artifact?{query}")["spans"]
