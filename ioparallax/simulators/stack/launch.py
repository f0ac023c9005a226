"""What a cluster's starters (stargate.py, prism.py, vcenter.py, esxtop.py, guests.py) need of the
stack, and the two steps they all take.

A starter receives a :class:`Launcher`: a way to start a process and wait for it to answer, the
ports policy, the cluster label and the scrape intervals; :class:`~ioparallax.simulators.stack.core.Stack`
is one, and nothing else of it is reached, so the starters do not import the orchestrator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ioparallax.simulators.process import Process
from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.config import BIN, pick_port


class Launcher(Protocol):
    """The narrow view of the stack a starter gets."""

    fixed_ports: bool  # try the familiar ports first (config.PREFERRED_PORTS)
    urls: dict[str, str]  # process name -> URL, for the status report
    scrape_interval: str
    vcenter_scrape_interval: str
    prism_scrape_interval: str
    fio_scrape_interval: str | None

    def spawn(self, name: str, argv: list[Any], url: str = "", env: dict[str, str] | None = None) -> Process: ...

    def wait_http(self, proc: Process, path: str = "/", timeout: float = 60.0) -> None: ...

    def resolved_cluster_label(self) -> str: ...


def wait_started(sim: Process, ready: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait until ``ready()`` (a simulator announces itself by writing a file); RuntimeError with the
    end of its log when ``sim`` exits or ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not ready():
        if not sim.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the {what} did not start:\n{sim.tail()}")
        time.sleep(0.1)


def start_exporter(
    launch: Launcher,
    part: ClusterPart,
    name: str,
    flags: Sequence[Any],
    *,
    subcommand: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> Process:
    """The exporter ``name`` (its program in BIN) listening on a port of its own on 127.0.0.1, started
    with ``flags`` and answering on /metrics."""
    port = pick_port(name, launch.fixed_ports)
    exp = launch.spawn(
        part.proc(name),
        [BIN / name, *subcommand, f"--web.listen-address=127.0.0.1:{port}", *flags],
        url=f"http://127.0.0.1:{port}",
        env=env,
    )
    launch.wait_http(exp, "/metrics")
    return exp
