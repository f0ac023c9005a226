"""Helpers for tests that start real processes: free ports, waiting for HTTP, promtool.

Every process a test starts binds to 127.0.0.1 on a port picked here, and is stopped by PID
(``Process.stop``, through the ``processes`` fixture) when the test ends. Starting, waiting and
stopping are ioparallax/simulators/process.py's, shared with the demo stack and the benches.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import tomllib
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ioparallax.exporters.common.web.server import ExporterServer
from ioparallax.simulators.process import Process, free_port, start, wait_for_http
from ioparallax.simulators.scenario import compile_scenario, parse_scenario

__all__ = [
    "BUILD",
    "Canary",
    "Exporter",
    "Listener",
    "REPO",
    "ShiftedClock",
    "VENV_BIN",
    "ManagedProcess",
    "NotReadyYet",
    "Process",
    "WatchScraper",
    "ec_cert",
    "exposition_of",
    "free_port",
    "has",
    "late_allowance",
    "metric_value",
    "parse_metrics",
    "promtool_check_metrics",
    "require_built",
    "require_tool",
    "run_entry_point",
    "samples",
    "scenario_data",
    "scenario_trace",
    "value",
    "venv_tool",
    "wait_for_http",
    "watched_dir",
]

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / ".build"
VENV_BIN = Path(sys.executable).parent


class ManagedProcess(Process):
    """A child started the way the tests start theirs: output in ``<log_dir>/<name>.log``, stopped by
    PID with ``stop()`` (ioparallax/simulators/process.py's :func:`~ioparallax.simulators.process.start`)."""

    def __init__(
        self, name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        p = start(name, argv, Path(log_dir) / f"{name}.log", env=env, cwd=cwd)
        super().__init__(p.name, p.argv, p.popen, p.log_path, p.url)


class NotReadyYet:
    """A stand-in for a server that is starting (Prometheus opening its TSDB): answers 503 to the
    first ``busy`` requests, then 200; ``requests`` counts what it was asked."""

    def __init__(self, busy: int) -> None:
        state = self
        self.busy, self.requests = busy, 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                state.requests += 1
                self.send_response(503 if state.requests <= state.busy else 200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ShiftedClock:
    """The ``time`` module as one module of the code under test sees it (``monkeypatch.setattr(module,
    "time", clock)``), with ``monotonic()`` moved forward by the test: an idle timeout or a sample's
    age passes at the test's command, not at the speed of a machine the test does not know."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


def late_allowance(cost: float, quiet: float = 0.5) -> float:
    """How far past its deadline a test accepts an answer: ``quiet`` seconds on a quiet machine, and
    three times ``cost`` on a loaded one, where ``cost`` is what the same operation took in the same
    test with nothing to wait for. A machine at load 15 is slow at everything, the answer after a
    deadline included; a fixed small margin made such tests fail at random (issue 29)."""
    return max(quiet, 3.0 * cost)


def venv_tool(name: str) -> str:
    """A console entry point installed in the same environment as the running Python."""
    path = VENV_BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} is not installed: run `make deps`")
    return found


#: console script -> "module:function", as pyproject.toml declares them.
ENTRY_POINTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def run_entry_point(name: str, argv: list, timeout: float = 30) -> subprocess.CompletedProcess:
    """``[venv_tool(name), *argv]`` run in this process: the console script's function called with
    ``argv`` in a thread (sys.argv[0] the script's path), its stdout and stderr captured (logging included: the programs point the
    root logger at sys.stderr, put back here afterwards), SystemExit as the exit status and an
    escaping exception as a traceback on stderr with status 1, as a Python process would end.

    For tests of what a command line that must fail says and returns: a process per case cost 1-8 s
    on the shared machine (a Python start importing the exporter). Each console script keeps a
    test that runs it as a process (tests/test_version.py runs them all). A command that
    does not end within ``timeout`` (it went on to serve) fails the test."""
    module, _, function = ENTRY_POINTS[name].partition(":")
    main = getattr(importlib.import_module(module), function)
    out, err = io.StringIO(), io.StringIO()
    status: list[int] = []

    def call() -> None:
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - as the interpreter would: printed, status 1
            traceback.print_exc()
            code = 1
        status.append(code or 0)

    root = logging.getLogger()
    handlers, level, sys_argv = root.handlers[:], root.level, sys.argv
    sys.argv = [str(VENV_BIN / name), *map(str, argv)]  # argparse's prog, as the script sees it
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            thread = threading.Thread(target=call, name=f"{name} in-process", daemon=True)
            thread.start()
            thread.join(timeout)
    finally:
        root.handlers[:], root.level, sys.argv = handlers, level, sys_argv
    if thread.is_alive():
        raise AssertionError(f"{name} {argv} still running after {timeout} s:\n{out.getvalue()}{err.getvalue()}")
    return subprocess.CompletedProcess([name, *argv], status[0], out.getvalue(), err.getvalue())


def require_tool(name: str) -> str:
    """The path of an external command the Makefile installs; the test FAILS (never skips) when it is
    missing: `make test` installs every tool a test uses, so a missing one is a broken set-up (a
    Makefile that forgot a package), which a skip would hide (tests/deploy/test_makefile_tools.py
    checks that every tool looked up here is in the Makefile's package list)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: `make deps` installs it (Makefile DEB_PACKAGES)", pytrace=False)
    return path


def require_built(path: Path) -> Path:
    """A binary `make deps-go` builds (.build/); the test FAILS when it is missing or empty."""
    if not path.is_file() or path.stat().st_size == 0:
        pytest.fail(f"{path} is not built: `make deps-go` builds it", pytrace=False)
    return path


def promtool_check_metrics(text: str) -> subprocess.CompletedProcess:
    """Run ``promtool check metrics`` on an exposition; returns the completed process.

    promtool exits non-zero on format errors and on lint problems (e.g. counters without
    ``_total``); callers assert on returncode and show stdout/stderr."""
    return subprocess.run(
        [require_tool("promtool"), "check", "metrics"], input=text.encode(), capture_output=True, timeout=30
    )


def start_exporter(processes, exporter: str, *args) -> tuple[int, Process]:
    """``<exporter> args...`` (the processes fixture stops it) listening on a free loopback port:
    the port and the process. A leading ``serve`` stays first (the flags follow the command)."""
    port = free_port()
    command = list(args[:1]) if args[:1] == ("serve",) else []
    flags = ["--web.listen-address", f"127.0.0.1:{port}", *args[len(command) :]]
    return port, processes.start(exporter, [venv_tool(exporter), *command, *flags])


def first_scrape(port: int, proc, exporter: str) -> tuple[requests.Response, str, dict]:
    """A just-started ``exporter`` (``<tool>-exporter``) on ``port``: its landing page answers and
    names it, and its first /metrics scrape says ``<tool>_up 1``. The landing page, the scrape's
    text and its samples."""
    landing = wait_for_http(f"http://127.0.0.1:{port}/", proc=proc)
    assert landing.status_code == 200 and exporter in landing.text
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    sm = samples(text)
    assert value(sm, f"{exporter.removesuffix('-exporter')}_up") == 1
    return landing, text, sm


def backfill_dump(exporter: str, files: list[Path], tmp_path: Path) -> str:
    """``<exporter> backfill --tsdb`` of ``files`` through real promtool (the OpenMetrics file
    checked to end in ``# EOF``), read back with ``promtool tsdb dump``: its text."""
    require_tool("promtool")
    om, tsdb = tmp_path / "backfill.om", tmp_path / "tsdb"
    argv = [venv_tool(exporter), "backfill", "--output", str(om), "--tsdb", str(tsdb), *(str(f) for f in files)]
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert om.read_text().endswith("# EOF\n")
    (tsdb / "wal").mkdir()  # promtool's dump opens the head's WAL; backfilled blocks have none
    dump = subprocess.run(["promtool", "tsdb", "dump", str(tsdb)], capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr
    return dump.stdout


def dumped_series(dump: str, name: str, match: str) -> list[tuple[int, float]]:
    """(timestamp ms, value) of the lines of a ``promtool tsdb dump`` holding ``name`` and
    ``match`` (a label, such as ``host="SQLVM01"``), in time order."""
    return sorted(
        (int(m.group(2)), float(m.group(1)))
        for line in dump.splitlines()
        if name in line and match in line and (m := re.search(r"\} (\S+) (\d+)$", line))
    )


class _Stoppable(Protocol):
    def stop(self) -> object: ...


_S = TypeVar("_S", bound=_Stoppable)


def started_and_stopped(start: Callable[..., _S]) -> Iterator[Callable[..., _S]]:
    """The body of a fixture that hands out ``start(...)`` (which returns a started server) and
    stops every server it started once the test is over: ``yield from started_and_stopped(...)``."""
    servers: list[_S] = []

    def tracked(*args, **kw) -> _S:
        server = start(*args, **kw)
        servers.append(server)
        return server

    yield tracked
    for server in servers:
        server.stop()


def without_waiting(fifo: Path, call) -> Any:
    """``call()``, run in a thread so that, were it to block on ``fifo``, the test fails (after a
    minute) instead of hanging: the FIFO is then opened for writing to release it."""
    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.setdefault("rc", call()), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        with open(fifo, "wb"):
            pass
        worker.join()
        pytest.fail(f"waited on the FIFO {fifo}")
    return result["rc"]


def fio_job_args(
    name: str,
    work: Path,
    *,
    size: str,
    rw: str,
    runtime: int,
    extra: tuple[str, ...] = (),
    filename: Path | None = None,
) -> list[str]:
    """fio's command line (without the binary) for one time-based 4 KiB psync job on
    ``filename`` (default ``work/<name>.dat``); ``extra`` holds what makes each run different
    (direct, rate, output format, status interval...)."""
    return [
        f"--name={name}",
        f"--filename={filename or work / f'{name}.dat'}",
        f"--size={size}",
        f"--rw={rw}",
        "--bs=4k",
        "--ioengine=psync",
        f"--runtime={runtime}",
        "--time_based",
        *extra,
    ]


_SERIES = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?) ")


def assert_clean(text: str) -> None:
    """promtool accepts the exposition and no series appears twice (the watch exporters' fault
    tests: a bad file beside good ones must leave the exposition valid)."""
    check = promtool_check_metrics(text)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
    series = [m.group(1) for line in text.splitlines() if not line.startswith("#") and (m := _SERIES.match(line))]
    dup = [s for s, n in Counter(series).items() if n > 1]
    assert not dup, dup[:5]


def exposition_of(*collectors: Any) -> str:
    """The text exposition /metrics would serve of a registry holding only ``collectors``."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry).decode()


def watched_dir(tmp_path: Path, name: str, good: Path, good_name: str) -> Path:
    """A watched directory ``name`` holding a copy of the real output ``good`` as ``good_name``:
    a watch exporter's fault test puts the bad file beside it, and the good one must stay served."""
    root = tmp_path / name
    root.mkdir()
    shutil.copy(good, root / good_name)
    return root


class WatchScraper:
    """A watch exporter's ``watcher`` and the ``collector`` reading it, scraped as /metrics is:
    every exposition is checked by :func:`assert_clean` before the test reads it."""

    def __init__(self, watcher: Any, collector: Any) -> None:
        self.watcher, self.collector = watcher, collector

    def exposition(self) -> str:
        text = exposition_of(self.collector)
        assert_clean(text)
        return text

    def scrape(self) -> dict[tuple[str, frozenset], float]:
        return samples(self.exposition())


def rejected_by_reason(sm: dict, family: str, source: Path) -> dict[str, float]:
    """A watch exporter's ``<family>`` counter (``<tool>_source_rejected_lines_total``) for one
    source, by reason, from the samples of an exposition."""
    return {dict(ls)["reason"]: v for (n, ls), v in sm.items() if n == family and dict(ls)["source"] == str(source)}


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """An exposition's samples by name and label set (the exporters' tests assert on these)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(sm: dict, name: str, **labels) -> float:
    """The one sample of ``name`` whose labels include ``labels``; fails when there is none or several."""
    want = {k: str(v) for k, v in labels.items()}
    found = [v for (n, ls), v in sm.items() if n == name and want.items() <= dict(ls).items()]
    assert len(found) == 1, f"{name}{want}: {len(found)} samples"
    return found[0]


def has(sm: dict, name: str, **labels) -> bool:
    """Whether a sample of ``name`` with labels including ``labels`` is there."""
    want = {k: str(v) for k, v in labels.items()}
    return any(n == name and want.items() <= dict(ls).items() for (n, ls) in sm)


def parse_metrics(text: str) -> dict:
    """{name: {frozenset(labels.items()): value}} of an exposition."""
    out: dict = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return out


def metric_value(metrics: dict, name: str, **labels) -> float:
    """The first series of ``name`` in ``parse_metrics``' result whose labels include ``labels``."""
    series = metrics.get(name, {})
    for key, v in series.items():
        if all(dict(key).get(k) == val for k, val in labels.items()):
            return v
    raise KeyError(f"{name}{labels} not in {sorted(series)[:5]}")


class Exporter:
    """A multi-target exporter served in-process (its ExporterServer and its targets): probes it."""

    def __init__(self, server: Any, targets: Any):
        self.server = server
        self.targets = targets

    @classmethod
    def serve(cls, app: Any, targets: Any) -> Exporter:
        """``make_app``'s (app, targets) served on a free loopback port; ``stop()`` it."""
        return cls(ExporterServer(app, "127.0.0.1", 0).start(), targets)

    def stop(self) -> None:
        self.server.stop()
        self.targets.close()

    # The scrape timeout of a probe whose test is not about deadlines: long enough that a first
    # probe (login, inventory, samples) ends by itself on a machine at load 30 (one took 9.6 s
    # of a 10 s timeout there); tests of a deadline pass their own.
    PROBE_TIMEOUT = 30.0

    def probe_text(self, target: str, timeout: float = PROBE_TIMEOUT) -> tuple[int, str]:
        r = requests.get(
            f"{self.server.url}/probe",
            params={"target": target},
            headers={"X-Prometheus-Scrape-Timeout-Seconds": str(timeout)},
            timeout=timeout + 30,
        )
        return r.status_code, r.text

    def probe(self, target: str, timeout: float = PROBE_TIMEOUT) -> dict:
        code, text = self.probe_text(target, timeout)
        assert code == 200, text
        return parse_metrics(text)


class Listener:
    """A TCP server on ``host`` (a free port unless ``port``): each accepted connection goes to
    :meth:`serve` in a thread of its own (``threads``: one per connection accepted) until
    :meth:`close`. The fakes and canaries of the fault tests are built on it; a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.sock = socket.create_server((host, port), backlog=64)
        self.host, self.port = self.sock.getsockname()[:2]
        self.address = f"{self.host}:{self.port}"
        self.closed = False
        self.threads: list[threading.Thread] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self.serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Canary(Listener):
    """A TCP server on loopback recording every connection and the bytes it received: a target
    credentials must never reach (the ``canary`` fixture, tests/conftest.py)."""

    def __init__(self):
        self.received: list[bytes] = []
        self._lock = threading.Lock()
        super().__init__()

    def serve(self, conn: socket.socket) -> None:
        conn.settimeout(1.0)
        try:
            data = conn.recv(65536)
        except OSError:
            data = b""
        with self._lock:
            self.received.append(data)
        conn.close()

    def connections(self) -> list[bytes]:
        with self._lock:
            return list(self.received)


_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)")


def drawn_data_paths(figure) -> list:
    """The paths a figure draws inside its axes through more than two points: its data (lines, stacked
    areas, steps), not a grid line (two points), a tick, the frame or a legend (not clipped to the
    axes), nor a definition (the page's shared glyphs, a hatch pattern, a clip rectangle)."""
    out = []
    for p in figure.select("svg path"):
        if p.find_parent(["defs", "pattern", "clippath"]):
            continue
        clipped = p.get("clip-path") or any(g.get("clip-path") for g in p.find_parents("g"))
        if clipped and len(_NUMBER.findall(p.get("d", ""))) > 4:
            out.append(p)
    return out


def scenario_data(
    *vms: dict[str, Any], name: str = "t", cvms: Sequence[str] = ("cvm-1",), period: str = "60s"
) -> dict[str, Any]:
    """A scenario as its YAML file holds it: ``vms`` on a cluster of ``cvms``, ``period`` long
    (what a test writes when no library scenario fits; the envelope is the same in each)."""
    return {"name": name, "period": period, "cluster": {"cvms": list(cvms)}, "vms": list(vms)}


def scenario_trace(data: dict[str, Any]) -> Any:
    """The trace of the scenario ``data`` as loaded from its file (a JSON round trip: fresh lists
    and dicts, as the YAML loader gives them)."""
    return compile_scenario(parse_scenario(json.loads(json.dumps(data))))


def ec_cert(directory: Path, name: str, cn: str, san: str | None = None) -> tuple[Path, Path]:
    """(certificate, key), self-signed (prime256v1), for ``cn`` and the ``san`` subject alternative
    names (``DNS:localhost,IP:127.0.0.1``; none when None), valid two days, written by openssl into
    ``directory`` as ``<name>.crt`` and ``<name>.key``."""
    key, crt = directory / f"{name}.key", directory / f"{name}.crt"
    argv = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    argv += ["-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", f"/CN={cn}"]
    if san:
        argv += ["-addext", f"subjectAltName={san}"]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    return crt, key


def self_signed_cert(directory: Path, name: str = "server") -> tuple[Path, Path]:
    """(certificate, key) for 127.0.0.1 (CN and IP subject alternative name), valid one day,
    written by openssl into ``directory``."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key
