"""What a cluster's starters (stargate.py, prism.py, vcenter.py, esxtop.py, guests.py) need of the
stack, and the two steps they all take.

A starter receives a :class:`Launcher`: a way to start a process and wait for it to answer, the
ports policy, the cluster label and the scrape intervals; :class:`~ioparallax.simulators.stack.core.Stack`
is one, and nothing else of it is reached, so the starters do not import the orchestrator.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from ioparallax.simulators.process import Process
from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.config import BIN, pick_port
from ioparallax.simulators.stack.scrape import probe_scrape


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


@dataclass(frozen=True)
class Credentials:
    """What an API exporter logs in with: the user, and the password, handed over in the
    environment variable ``password_env`` (never on a command line; never in a repr)."""

    username: str
    password_env: str
    password: str = field(repr=False)


def start_api_exporter(
    launch: Launcher,
    part: ClusterPart,
    source: str,
    target: str,
    tls: dict[str, Any],
    credentials: Credentials,
    interval: str,
) -> list[dict[str, Any]]:
    """The exporter of an API view (``source``: vcenter, prism) probing the simulator at ``target``
    (host:port) with ``tls`` (its per-target TLS keys) and ``credentials``; the scrape job probing
    it every ``interval``."""
    cfg = {
        "defaults": {
            "username": credentials.username,
            "password_env": credentials.password_env,
            "inventory_refresh": "1m",
        },
        "allow_unlisted_targets": False,
        "targets": {target: tls},
    }
    cfg_path = part.workdir / f"{source}-exporter.yml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    exp = start_exporter(
        launch,
        part,
        f"{source}-exporter",
        [f"--config.file={cfg_path}"],
        env={credentials.password_env: credentials.password},
    )
    part.exporters.append(exp.url.split("://", 1)[1])
    labels = part.labels(launch.resolved_cluster_label())
    return [probe_scrape(source, exp.url, [target], interval=interval, labels=labels)]


def start_announcing(
    launch: Launcher,
    part: ClusterPart,
    name: str,
    argv: Sequence[Any],
    announce: Path,
    env: dict[str, str] | None = None,
) -> Any:
    """A simulator of the cluster (``argv``: its program in BIN and its flags, after the scenario)
    that announces where it serves by writing the JSON file ``announce`` whole once it does; that
    file's content. A previous run's file is removed first."""
    announce.unlink(missing_ok=True)
    sim = launch.spawn(part.proc(name), [BIN / argv[0], part.scenario, *argv[1:]], env=env)
    wait_started(sim, announce.exists, name.replace("-", " "))
    return json.loads(announce.read_text())
