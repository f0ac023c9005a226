"""Child processes of the demo stack, the tests and the benches: started, watched and stopped one way.

:func:`start` runs a program in its own session (process group) with its output (stdout and stderr)
in a log file and stdin closed; :meth:`Process.stop` stops it by PID: SIGTERM to its process group,
SIGKILL after a timeout. :func:`wait_for_http` waits until a started server answers, failing early
with the last lines of its log when it exits. Servers are told to listen on 127.0.0.1, on a port
from :func:`free_port`.

A child also dies with the process that started it (Linux ``PR_SET_PDEATHSIG``, SIGTERM): a test
run or a demo killed with SIGKILL leaves no simulator, exporter or Prometheus behind. The kernel
sends the signal when the *thread* that started the child ends, so start children from a thread
that outlives them (the main thread, or a pool worker that lives until they are stopped, as the
e2e stack pool's).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

OUTPUT_CHARS = 4000  # how much of a child's log an error message shows

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl() -> Callable[..., int] | None:
    """libc's prctl, loaded here in the parent (the child, forked from a process that may run threads,
    only calls it); None where there is none (not Linux)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def _die_with(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn``: the child receives SIGTERM when the thread of ``parent`` that started it ends."""
    prctl = _PRCTL
    if prctl is None:
        return None

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl: no signal will come
            os._exit(1)

    return die_with_parent


@dataclass
class Process:
    """A started child: its name (for messages and the log file), argv, Popen, log file and, for a
    server, the URL it serves."""

    name: str
    argv: list[str]
    popen: subprocess.Popen
    log_path: Path
    url: str = ""

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        """Everything the child printed so far ('' when the log cannot be read)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def output(self, chars: int = OUTPUT_CHARS) -> str:
        """The last ``chars`` characters the child printed."""
        return self.log_text()[-chars:]

    def tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines the child printed."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    def exited(self) -> str:
        """The message for a child that exited when it should run."""
        return f"{self.name} exited with code {self.popen.returncode}:\n{self.output()}"

    def wait_for_output(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """Wait until the child prints something matching ``pattern`` (e.g. its listen URL)."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            m = rx.search(self.log_text())
            if m:
                return m
            if not self.alive():
                raise RuntimeError(self.exited())
            time.sleep(0.05)
        raise TimeoutError(f"{self.name} did not print {pattern!r} in {timeout:g} s:\n{self.output()}")

    def terminate(self) -> None:
        """SIGTERM to the child's process group (what it started too), if the child still runs."""
        if self.alive():
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL if the child has not exited after ``timeout`` seconds."""
        stop_all([self], timeout)


def _environment() -> dict[str, str]:
    """A copy of this process' environment, taken from any thread: pytest sets and deletes
    PYTEST_CURRENT_TEST from the main thread around every test, and a copy made while it does raises
    KeyError (os.environ is copied key by key); copying again succeeds."""
    for _ in range(100):
        try:
            return dict(os.environ)
        except KeyError:
            continue
    return dict(os.environ)


def start(
    name: str,
    argv: Sequence[str | os.PathLike[str]],
    log_path: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    append: bool = False,
    url: str = "",
) -> Process:
    """Start ``argv`` in a new session, stdin closed, stdout and stderr into ``log_path`` (truncated,
    or appended to with ``append``), with ``env`` over this process' environment; the child gets
    SIGTERM when the thread that started it ends (see the module's docstring)."""
    args = [str(a) for a in argv]
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab" if append else "wb") as log:
        popen = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=None if env is None else {**_environment(), **env},
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with(os.getpid()),
        )
    return Process(name, args, popen, log_path, url)


def stop_all(procs: Sequence[Process], timeout: float = 10.0, kill_timeout: float = 5.0) -> None:
    """Stop ``procs`` by PID: SIGTERM to all of them first (in the order given), then, for each,
    SIGKILL if it has not exited ``timeout`` seconds later."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.popen.wait(kill_timeout)


# verify=False is used only for the simulators' self-signed loopback certificates: urllib3's warning
# about it is silenced for 127.0.0.1 alone, once (warnings.catch_warnings is not thread-safe, and
# stacks are started from several threads at once).
warnings.filterwarnings("ignore", message="Unverified HTTPS request is being made to host '127.0.0.1'")


def loopback_get(url: str, **kwargs: Any) -> requests.Response:
    """GET without the environment's proxy settings: the processes a stack starts listen on loopback,
    and reading the environment from a background thread races pytest, which sets and deletes
    PYTEST_CURRENT_TEST in it around every test (iterating os.environ then raises KeyError)."""
    with requests.Session() as session:
        session.trust_env = False
        return session.get(url, **kwargs)


def wait_for_http(
    url: str,
    timeout: float = 30.0,
    proc: Process | None = None,
    *,
    status: int | None = None,
    verify: bool = True,
    interval: float = 0.1,
) -> requests.Response:
    """Poll ``url`` until it answers (with ``status``, if given: Prometheus' /-/ready answers 503
    while it opens its TSDB) and return the answer. Fails with the child's output if ``proc``
    exits first, with the last answer or error when ``timeout`` passes. ``verify=False``: readiness
    only, of a server with a self-signed certificate (the vCenter simulator)."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(proc.exited())
        try:
            r = loopback_get(url, timeout=2, verify=verify)
            if status is None or r.status_code == status:
                return r
            last = f"HTTP {r.status_code}"
        except requests.RequestException as exc:
            last = f"{exc.__class__.__name__}: {exc}"
        time.sleep(interval)
    who = proc.name if proc is not None else "the server"
    raise TimeoutError(
        f"{who} was not ready on {url} within {timeout:g} s ({last})"
        + (f":\n{proc.output()}" if proc is not None else "")
    )


_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def _ephemeral_ports() -> range:
    """The kernel's range for port 0 and outgoing connections (Linux), else IANA's."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            low, high = (int(x) for x in fh.read().split())
        return range(low, high + 1)
    except (OSError, ValueError):
        return range(49152, 65536)


def _share(ports: range) -> range:
    """This process' share of ``ports`` when several test processes pick ports side by side (the
    suite's unit and e2e runs, pytest-xdist's workers): ``IOPARALLAX_PORT_SHARE=i/n`` gives the
    i-th of n equal slices, and an xdist worker (``PYTEST_XDIST_WORKER=gw<k>`` of
    ``PYTEST_XDIST_WORKER_COUNT``) takes the k-th slice of that. Two processes then never hand out
    the same port, which ``_handed_out`` alone guarantees only within one process."""
    slices: list[tuple[int, int]] = []
    text = os.environ.get("IOPARALLAX_PORT_SHARE", "")
    if text:
        index, sep, count_text = text.partition("/")
        if not (sep and index.isdigit() and count_text.isdigit() and 0 <= int(index) < int(count_text)):
            raise ValueError(f"IOPARALLAX_PORT_SHARE: expected i/n with 0 <= i < n, got {text!r}")
        slices.append((int(index), int(count_text)))
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit() and int(worker[2:]) < int(count):
        slices.append((int(worker[2:]), int(count)))
    for i, n in slices:
        size = len(ports) // n
        ports = range(ports.start + i * size, ports.start + (i + 1) * size)
    return ports


def free_port() -> int:
    """A loopback port free now and not handed out before by this process. Stacks started side by
    side (the e2e tests) pick ports before their processes bind them, so the port is taken below
    the kernel's ephemeral range: there, any process binding port 0 or opening a connection (a
    scrape, a probe) could take it in between ("address already in use"); below it, only a process
    asking for that very port can. Port 0's answer when no port below is free. Test processes
    running side by side each pick from their own share of that range (``_share``)."""
    ephemeral = _ephemeral_ports()
    below = _share(range(10000, ephemeral.start)) if ephemeral.start > 20000 else range(0)
    with _handed_out_lock:
        for _ in range(200 if below else 0):
            port = random.choice(below)
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
