"""The demo stack's orchestrator: :class:`Stack` starts every cluster's simulators and exporters,
then the monitoring stack, and stops what it started.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from ioparallax.paths import ALERTS_DIR, workspace
from ioparallax.simulators.process import Process, loopback_get, start as start_process, stop_all, wait_for_http
from ioparallax.simulators.scenario import compile_scenario, load_scenario, scenario_path, write_with_origin
from ioparallax.simulators.stack.clusters import CLUSTER_NAME, ClusterPart, cluster_specs
from ioparallax.simulators.stack.esxtop import start_esxtop
from ioparallax.simulators.stack.guests import start_guests
from ioparallax.simulators.stack.monitoring import (
    start_alertmanager,
    start_node_exporter,
    start_prometheus,
    start_victoria_metrics,
)
from ioparallax.simulators.stack.prism import start_prism
from ioparallax.simulators.stack.report import dashboards_status, status
from ioparallax.simulators.stack.scrape import merge_jobs
from ioparallax.simulators.stack.stargate import start_stargate
from ioparallax.simulators.stack.vcenter import start_vcenter

log = logging.getLogger("ioparallax.demo")


@dataclass
class Stack:
    """Everything ``make demo`` starts; usable as a context manager in tests."""

    scenario: str = "zero-heavy"  # one scenario, or several comma-separated (see ``scenarios``)
    # Several simulated clusters in one Prometheus: each entry a scenario, optionally
    # ``scenario@cluster``; empty: ``scenario``. With more than one, each cluster is named after its
    # scenario (the YAML's name) unless named with @.
    scenarios: list[str] = field(default_factory=list)
    cluster_label: str | None = None  # the target label naming the cluster; None: ioparallax/mixin/config.yml's
    workdir: Path = workspace() / ".run" / "demo"
    fixed_ports: bool = True  # try the familiar ports first (demo); tests pass False
    scrape_interval: str = "5s"
    evaluation_interval: str = "5s"
    vcenter_scrape_interval: str = "20s"
    # Prism's stats are 30 s samples; the exporter's sample keeper reads every one whatever the
    # scrape interval, and 15 s scrapes show each within half a sample.
    prism_scrape_interval: str = "15s"
    # fio writes a status record every second; scraping its exporter as often keeps fio's own
    # per-interval numbers (fio_*_interval_*) at 1 s, so a 1 s burst is seen at its height.
    fio_scrape_interval: str | None = "1s"
    rules_dir: Path | None = None  # rule files (*.rules.yml) to load; None: the repo's alerts/
    extra_rule_files: list[Path] = field(default_factory=list)
    alertmanager_webhook: str | None = None  # tests: receive alerts here
    long_term: bool = False  # VictoriaMetrics as the remote_write target (--long-term)
    prometheus_flags: list[str] = field(default_factory=list)  # more flags (bench: the admin API)
    # --from-start: every cluster's period second 0 falls at the stack's start (``origin``, Unix time),
    # before any simulator runs, so no view ever shows the previous period's end (a 20 s lead once let
    # the guests show scaling-ramp's eight VMs for 20 s: a burst the burst alert rightly saw); each
    # cluster's simulators read one copy of its scenario with that origin (docs/scenarios.md "Time").
    from_start: bool = False
    origin: int | None = field(default=None, init=False)
    procs: list[Process] = field(default_factory=list)
    urls: dict[str, str] = field(default_factory=dict)

    # -- process handling -----------------------------------------------------------------
    def spawn(self, name: str, argv: list[Any], url: str = "", env: dict[str, str] | None = None) -> Process:
        """Start one process of the stack: its log in logs/, its PID file in pids/ (a later start stops
        it if this one is killed), its URL in ``urls``."""
        proc = start_process(
            name, argv, self.workdir / "logs" / f"{name}.log", env=env, cwd=self.workdir, append=True, url=url
        )
        self.procs.append(proc)
        (self.workdir / "pids").mkdir(exist_ok=True)
        (self.workdir / "pids" / f"{name}.pid").write_text(str(proc.pid))
        if url:
            self.urls[name] = url
        return proc

    def wait_http(self, proc: Process, path: str = "/", timeout: float = 60.0) -> None:
        """Wait until ``path`` answers 200 (Prometheus' and Alertmanager's /-/ready answer 503 while
        they start: the TSDB is opened, the WAL replayed). Readiness only: the vCenter simulator's
        certificate is self-signed."""
        wait_for_http(proc.url + path, timeout, proc, status=200, verify=False, interval=0.2)

    def stop(self) -> None:
        stop_all(list(reversed(self.procs)), timeout=10)
        for proc in self.procs:
            (self.workdir / "pids" / f"{proc.name}.pid").unlink(missing_ok=True)
        self.procs.clear()

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the stack --------------------------------------------------------------------------
    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._kill_leftovers()
        if self.from_start:
            self.origin = int(time.time())
            log.info("origin=%d: every scenario's period second 0, now", self.origin)
        self.clusters = self._cluster_parts()
        self.trace = self.clusters[0].trace  # a stack of one cluster: its scenario's trace
        scrape: list[dict[str, Any]] = []
        for part in self.clusters:
            scrape.extend(start_stargate(self, part))
            # The VM view of the cluster: vCenter on ESXi, Prism on AHV (``cluster.hypervisor``).
            scrape.extend(start_prism(self, part) if part.ahv else start_vcenter(self, part))
            scrape.extend(start_esxtop(self, part))  # ESXi: the 2 s VM view beside vCenter's 20 s
            scrape.extend(start_guests(self, part))
        scrape.extend(start_node_exporter(self))
        start_alertmanager(self)
        if self.long_term:
            start_victoria_metrics(self)
        start_prometheus(self, merge_jobs(scrape))

    def resolved_cluster_label(self) -> str:
        """The target label naming the cluster: ``cluster_label``, or when it is None
        ioparallax/mixin/config.yml's, read on first use (start does) and kept in ``cluster_label``."""
        if self.cluster_label is None:
            from ioparallax.mixin.config import load_config

            self.cluster_label = load_config().cluster_label
        return self.cluster_label

    def _cluster_parts(self) -> list[ClusterPart]:
        """The scenarios as clusters, named; ValueError (naming the scenario) for a name used twice."""
        label = self.resolved_cluster_label()
        specs = cluster_specs(self.scenarios or [self.scenario])
        if not label and (len(specs) > 1 or any(cluster for _, cluster in specs)):
            raise ValueError(
                "named or several clusters need a cluster label: cluster_label is '' in ioparallax/mixin/config.yml"
            )
        parts: list[ClusterPart] = []
        for scenario, cluster in specs:
            loaded = load_scenario(scenario)
            if cluster is None and len(specs) > 1:
                cluster = loaded.name
                if not CLUSTER_NAME.fullmatch(cluster):
                    raise ValueError(
                        f"--scenario {scenario}: its name {cluster!r} cannot name a cluster (letters, "
                        "digits, '.', '_', '-'): name it with scenario@cluster"
                    )
            if cluster is not None and any(p.cluster == cluster for p in parts):
                raise ValueError(
                    f"--scenario {scenario}: a second cluster named {cluster!r}; name each with "
                    f"scenario@cluster (e.g. {scenario}@{cluster}-b)"
                )
            workdir = self.workdir if cluster is None else self.workdir / "clusters" / cluster
            workdir.mkdir(parents=True, exist_ok=True)
            # The simulators run in the workdir: a scenario file relative to here must reach them.
            source = scenario_path(scenario).resolve()
            if self.origin is not None:  # one copy with the origin, read by all of the cluster's simulators
                source = write_with_origin(source, self.origin, workdir / "scenario.origin.yaml")
                loaded = load_scenario(source)
            parts.append(ClusterPart(str(source), cluster, workdir, compile_scenario(loaded)))
        return parts

    def _kill_leftovers(self) -> None:
        """A demo killed with SIGKILL leaves PID files: stop those processes before starting anew."""
        piddir = self.workdir / "pids"
        if not piddir.is_dir():
            return
        for pid_file in piddir.glob("*.pid"):
            try:
                pid = int(pid_file.read_text())
                os.killpg(pid, signal.SIGTERM)
                log.info("stopped leftover %s (pid %d)", pid_file.stem, pid)
            except (ValueError, ProcessLookupError, PermissionError):
                pass
            pid_file.unlink(missing_ok=True)

    def rule_files(self) -> list[Path]:
        rules_dir = self.rules_dir if self.rules_dir is not None else ALERTS_DIR
        rules = sorted(rules_dir.glob("*.rules.yml")) + sorted(rules_dir.glob("*.rules.yaml"))
        return rules + list(self.extra_rule_files)

    # -- status -----------------------------------------------------------------------------
    def query(self, promql: str) -> list[dict[str, Any]]:
        r = loopback_get(self.urls["prometheus"] + "/api/v1/query", params={"query": promql}, timeout=10)
        r.raise_for_status()
        return r.json()["data"]["result"]

    def targets(self) -> list[dict[str, Any]]:
        r = loopback_get(self.urls["prometheus"] + "/api/v1/targets", timeout=10)
        r.raise_for_status()
        return r.json()["data"]["activeTargets"]

    def wait_scraped(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait until every target has been scraped once; returns the targets."""
        deadline = time.monotonic() + timeout
        targets: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            try:
                targets = self.targets()
            except requests.RequestException:  # e.g. 503 while Prometheus is still starting
                time.sleep(1)
                continue
            if targets and all(t.get("lastScrape", "").startswith("20") and t["health"] != "unknown" for t in targets):
                return targets
            time.sleep(1)
        return targets

    def firing_alerts(self) -> list[dict[str, Any]]:
        return [a for a in self.alerts() if a["state"] == "firing"]

    @property
    def named_clusters(self) -> list[str]:
        """The cluster label's values of this stack's clusters ([] for one unnamed cluster)."""
        return [p.cluster for p in getattr(self, "clusters", []) if p.cluster is not None]

    def report(self) -> str:
        """The demo's status report (ioparallax/simulators/stack/report.py)."""
        return status(self)

    def dashboards_report(self) -> str:
        """How many of the dashboards' queries return data now, per cluster (report.py)."""
        return dashboards_status(self)

    def long_term_rows(self) -> float | None:
        """Samples VictoriaMetrics has received from Prometheus' remote_write; None if unknown."""
        try:
            text = loopback_get(self.urls["victoria-metrics"] + "/metrics", timeout=10).text
        except requests.RequestException:
            return None
        for line in text.splitlines():
            if line.startswith('vm_rows_inserted_total{type="promremotewrite"}'):
                return float(line.rsplit(" ", 1)[1])
        return None

    def alerts(self) -> list[dict[str, Any]]:
        r = loopback_get(self.urls["prometheus"] + "/api/v1/alerts", timeout=10)
        r.raise_for_status()
        return r.json()["data"]["alerts"]
