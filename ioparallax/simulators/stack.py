"""The demo stack: a simulated cluster and the real monitoring stack, as plain processes.

``ioparallax-demo`` (what ``make demo`` runs) starts, all bound to 127.0.0.1:

- the simulators, fed by one scenario: one Stargate server per CVM, the cluster's manager (the
  vCenter simulator on an ESXi cluster, the Prism simulator on an AHV one: the scenario's
  ``cluster.hypervisor``), the guest simulator (per Linux VM, the fio status stream and sysfs disk facts of that guest; per
  Windows VM, its windows_exporter metrics and, for DiskSPD, its -Rxml results);
- the exporters, pointed at them: the Stargate exporter, the vCenter or Prism exporter, one fio exporter per Linux
  VM, the diskspd exporter for the DiskSPD results, the vdbench exporter for the vdbench runs;
- Debian's Prometheus (with ``deploy/`` scrape config shape and ``alerts/`` rules), Alertmanager
  and node_exporter;
- with ``--long-term``, Debian's VictoriaMetrics (single node) as Prometheus' remote_write target:
  the long-term store, holding the raw and the recorded series, queried through its
  Prometheus-compatible API;

then prints where to look, which targets are up and which alerts fire. Ctrl-C stops everything it
started, by PID. End-to-end tests use :class:`Stack` directly.

Several scenarios (``--scenario zero-heavy,clean-oltp``) run as several simulated clusters, each a
:class:`ClusterPart` with its own simulators and exporters, scraped by the one Prometheus into the
same jobs; every target of a cluster carries the cluster label (ioparallax/mixin/config.yml ``cluster_label``)
as a Prometheus target label, never set by an exporter, so the rules keep the clusters apart even
where their vdisk ids and VM names are the same.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
import yaml

from ioparallax.paths import ALERTS_DIR, workspace
from ioparallax.simulators.process import (
    Process,
    free_port,
    loopback_get,
    start as start_process,
    stop_all,
    wait_for_http,
)
from ioparallax.simulators.scenario import Trace, compile_scenario, load_scenario, scenario_path, write_with_origin

log = logging.getLogger("ioparallax.demo")

# The Go vCenter simulator `make deps-go` builds; the demo's state under .run/ (in a checkout, beside
# the Makefile; from an installed wheel, in the current directory: ioparallax/paths.py).
BUILD = workspace() / ".build"
BIN = Path(sys.executable).parent

# Preferred ports for the demo (the usual ones, so the URLs are familiar); a busy port falls back
# to a free one.
PREFERRED_PORTS = {
    "prometheus": 9090,
    "alertmanager": 9093,
    "node-exporter": 9100,
    "stargate-exporter": 9761,
    "vcenter-exporter": 9762,
    "prism-exporter": 9764,
    "fio-exporter": 9763,  # the first VM's; the others get free ports
    "diskspd-exporter": 9765,
    "vdbench-exporter": 9766,
    "victoria-metrics": 8428,
}


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def pick_port(name: str, fixed: bool) -> int:
    preferred = PREFERRED_PORTS.get(name)
    if fixed and preferred and port_is_free(preferred):
        return preferred
    return free_port()


# The label a probe job's static_configs group carries its exporter's address in (a blackbox-style
# job whose targets several exporters probe: one per cluster). ``__tmp`` labels are Prometheus'
# scratch space for relabelling and are dropped from the target's labels.
EXPORTER_LABEL = "__tmp_exporter"

_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def cluster_specs(values: list[str]) -> list[tuple[str, str | None]]:
    """``--scenario`` values as (scenario, cluster name or None): each value one or several
    comma-separated scenarios, each a library name or YAML file, optionally ``@<cluster name>``."""
    out: list[tuple[str, str | None]] = []
    for value in values:
        for spec in value.split(","):
            spec = spec.strip()
            if not spec:
                continue
            scenario, at, cluster = spec.partition("@")
            if at and not _CLUSTER_NAME.fullmatch(cluster):
                raise ValueError(
                    f"--scenario {spec!r}: the cluster name after @ must be letters, digits, "
                    f"'.', '_' or '-', got {cluster!r}"
                )
            out.append((scenario, cluster if at else None))
    if not out:
        raise ValueError("--scenario: no scenario given")
    return out


@dataclass
class ClusterPart:
    """One simulated cluster of a stack: a scenario's simulators (the CVMs' Stargate pages, vCenter,
    the guests) and the exporters reading them. Its targets carry ``cluster_label=cluster`` (target
    labels in the scrape config); a stack of one cluster given without a name leaves them unlabelled."""

    scenario: str  # library name or YAML file
    cluster: str | None  # the cluster label's value; None: the stack's only cluster, unlabelled
    workdir: Path  # its generated configs, trace, guest files
    trace: Trace
    exporters: list[str] = field(default_factory=list)  # host:port of its Stargate and vCenter/Prism exporters

    @property
    def ahv(self) -> bool:
        """An AHV cluster: its VM view comes from Prism, not vCenter."""
        return self.trace.scenario.cluster.ahv

    @property
    def manager(self) -> str:
        """What the VM view comes from, as the demo's summary names it."""
        return "Prism" if self.ahv else "vCenter"

    def proc(self, name: str) -> str:
        """A process name unique in the stack (its log file, PID file and URL key)."""
        return name if self.cluster is None else f"{self.cluster}.{name}"

    def labels(self, cluster_label: str, **more: str) -> dict[str, str]:
        """The target labels of this cluster's targets, with ``more``."""
        return ({cluster_label: self.cluster} if self.cluster is not None else {}) | more


def merge_jobs(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Scrape configs of one job from several clusters as one job, their static_configs groups side
    by side: Prometheus refuses two jobs of one name, and the mixin selects each source by its job."""
    jobs: dict[str, dict[str, Any]] = {}
    for cfg in configs:
        if cfg["job_name"] in jobs:
            jobs[cfg["job_name"]]["static_configs"].extend(cfg["static_configs"])
        else:
            jobs[cfg["job_name"]] = {**cfg, "static_configs": list(cfg["static_configs"])}
    return list(jobs.values())


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
    def _start(self, name: str, argv: list[Any], url: str = "", env: dict[str, str] | None = None) -> Process:
        proc = start_process(
            name, argv, self.workdir / "logs" / f"{name}.log", env=env, cwd=self.workdir, append=True, url=url
        )
        self.procs.append(proc)
        (self.workdir / "pids").mkdir(exist_ok=True)
        (self.workdir / "pids" / f"{name}.pid").write_text(str(proc.pid))
        if url:
            self.urls[name] = url
        return proc

    def _wait_http(self, proc: Process, path: str = "/", timeout: float = 60.0) -> None:
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
            for starter in (self._start_stargate, self._start_vm_view, self._start_guests):
                scrape.extend(starter(part))
        scrape.extend(self._start_node_exporter())
        self._start_alertmanager()
        if self.long_term:
            self._start_victoria_metrics()
        self._start_prometheus(merge_jobs(scrape))

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
                if not _CLUSTER_NAME.fullmatch(cluster):
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

    def _exporter_scrape(self, job: str, url: str, interval: str | None = None, **extra: Any) -> dict[str, Any]:
        cfg: dict[str, Any] = {"job_name": job, "static_configs": [{"targets": [url.split("://", 1)[1]]}]}
        if interval:
            cfg["scrape_interval"] = interval
        cfg.update(extra)
        return cfg

    def _start_stargate(self, part: ClusterPart) -> list[dict[str, Any]]:
        """One simulated Stargate per CVM, and the Stargate exporter probing each CVM (one per
        cluster: its vdisk mapping is the cluster's, vdisk ids being unique only within one)."""
        urls_file = part.workdir / "stargate-urls.json"
        urls_file.unlink(missing_ok=True)
        sim = self._start(
            part.proc("stargate-simulator"),
            [
                BIN / "stargate-simulator",
                part.scenario,
                "--host",
                "127.0.0.1",
                "--urls-file",
                urls_file,
            ],
        )
        deadline = time.monotonic() + 30
        while not urls_file.exists():  # written whole by a rename
            if not sim.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the Stargate simulator did not start:\n{sim.tail()}")
            time.sleep(0.1)
        cvms: dict[str, str] = json.loads(urls_file.read_text())
        for name, url in cvms.items():
            self.urls[part.proc(f"stargate {name}")] = url
        if importlib.util.find_spec("ioparallax.exporters.stargate.cli") is None:
            log.warning("the Stargate exporter is not built yet: the simulated CVMs' pages are served, not scraped")
            return []
        # The vdisk -> VM disk mapping a PoC keeps in a YAML file (or reads from Prism): here it is
        # the scenario's identity map, so stargate_vdisk_info joins to the VM and guest views.
        mapping = {
            "vdisks": {
                str(row["vdisk_id"]): {"vm": row["vm"], "disk": row["unit"]} for row in part.trace.identity_map()
            },
            # The allow-list: the exporter refuses (HTTP 400) any CVM not listed here.
            "targets": ["127.0.0.1"],
        }
        mapping_path = part.workdir / "stargate-vdisks.yml"
        mapping_path.write_text(yaml.safe_dump(mapping, sort_keys=False))
        port = pick_port("stargate-exporter", self.fixed_ports)
        exp = self._start(
            part.proc("stargate-exporter"),
            [
                BIN / "stargate-exporter",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--config.file={mapping_path}",
            ],
            url=f"http://127.0.0.1:{port}",
        )
        self._wait_http(exp, "/metrics")
        part.exporters.append(exp.url.split("://", 1)[1])
        # One probe per CVM, as in production (deploy/prometheus/prometheus.yml).
        targets = [u.split("://", 1)[1] for u in cvms.values()]
        return [self._probe_scrape("stargate", exp.url, targets, labels=part.labels(self.resolved_cluster_label()))]

    def _start_vm_view(self, part: ClusterPart) -> list[dict[str, Any]]:
        """The VM view of the cluster: vCenter on ESXi, Prism on AHV (``cluster.hypervisor``)."""
        return self._start_prism(part) if part.ahv else self._start_vcenter(part)

    def _start_prism(self, part: ClusterPart) -> list[dict[str, Any]]:
        """The Prism simulator (HTTPS with a certificate made for this run) and the Prism exporter
        probing it, TLS verified against that certificate (``ca_file``), as against a real Prism."""
        cert, key = part.workdir / "prism-cert.pem", part.workdir / "prism-key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
            + ["-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        url_file = part.workdir / "prism-url.json"
        url_file.unlink(missing_ok=True)
        password = "demo-" + os.urandom(6).hex()  # a fresh one per run; never printed
        env = {"IOPARALLAX_DEMO_PRISM_PASSWORD": password}
        sim = self._start(
            part.proc("prism-simulator"),
            [BIN / "prism-simulator", part.scenario, "--listen", "127.0.0.1:0", "--username", "demo"]
            + ["--password-env", "IOPARALLAX_DEMO_PRISM_PASSWORD", "--tls-cert", cert, "--tls-key", key]
            + ["--url-file", url_file],
            env=env,
        )
        deadline = time.monotonic() + 30
        while not url_file.exists():
            if not sim.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the Prism simulator did not start:\n{sim.tail()}")
            time.sleep(0.1)
        sim_url = json.loads(url_file.read_text())["prism"]
        self.urls[part.proc("prism-simulator")] = sim_url
        target = sim_url.split("://", 1)[1].rstrip("/")
        cfg = {
            "defaults": {
                "username": "demo",
                "password_env": "IOPARALLAX_DEMO_PRISM_PASSWORD",
                "inventory_refresh": "1m",
            },
            "allow_unlisted_targets": False,
            "targets": {target: {"ca_file": str(cert)}},
        }
        cfg_path = part.workdir / "prism-exporter.yml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        port = pick_port("prism-exporter", self.fixed_ports)
        exp = self._start(
            part.proc("prism-exporter"),
            [BIN / "prism-exporter", f"--web.listen-address=127.0.0.1:{port}", f"--config.file={cfg_path}"],
            url=f"http://127.0.0.1:{port}",
            env=env,
        )
        self._wait_http(exp, "/metrics")
        part.exporters.append(exp.url.split("://", 1)[1])
        return [
            self._probe_scrape(
                "prism",
                exp.url,
                [target],
                interval=self.prism_scrape_interval,
                labels=part.labels(self.resolved_cluster_label()),
            )
        ]

    def _start_vcenter(self, part: ClusterPart) -> list[dict[str, Any]]:
        """The scenario vCenter simulator (Go, govmomi) and the vCenter exporter probing it."""
        binary = BUILD / "vcsim-scenario"
        if not binary.is_file() or binary.stat().st_size == 0:
            raise RuntimeError(f"{binary} is missing: run `make deps` (it builds the vCenter simulator)")
        trace_file = part.workdir / "trace.json"
        trace_file.write_text(part.trace.to_json())
        sim_port = free_port()
        password = "demo-" + os.urandom(6).hex()  # a fresh one per run; never printed
        sim = self._start(
            part.proc("vcenter-simulator"),
            [
                binary,
                "-trace",
                trace_file,
                "-listen",
                f"127.0.0.1:{sim_port}",
                "-username",
                "demo@vsphere.local",
                "-password",
                password,
            ],
            url=f"https://127.0.0.1:{sim_port}",
        )
        self._wait_http(sim, "/about", timeout=120)
        cfg = {
            "defaults": {
                "username": "demo@vsphere.local",
                "password_env": "IOPARALLAX_DEMO_VCENTER_PASSWORD",
                "inventory_refresh": "1m",
            },
            "allow_unlisted_targets": False,
            # The simulator's certificate is self-signed: the one explicit opt-out.
            "targets": {f"127.0.0.1:{sim_port}": {"insecure_skip_verify": True}},
        }
        cfg_path = part.workdir / "vcenter-exporter.yml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        port = pick_port("vcenter-exporter", self.fixed_ports)
        exp = self._start(
            part.proc("vcenter-exporter"),
            [
                BIN / "vcenter-exporter",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--config.file={cfg_path}",
            ],
            url=f"http://127.0.0.1:{port}",
            env={"IOPARALLAX_DEMO_VCENTER_PASSWORD": password},
        )
        self._wait_http(exp, "/metrics")
        part.exporters.append(exp.url.split("://", 1)[1])
        return [
            self._probe_scrape(
                "vcenter",
                exp.url,
                [f"127.0.0.1:{sim_port}"],
                interval=self.vcenter_scrape_interval,
                labels=part.labels(self.resolved_cluster_label()),
            )
        ]

    def _probe_scrape(
        self,
        job: str,
        exporter_url: str,
        targets: list[str],
        interval: str | None = None,
        params: dict[str, list[str]] | None = None,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A blackbox-style scrape config: each target becomes ?target=, the exporter the address.
        The exporter's address travels in the targets' group (EXPORTER_LABEL), so that the groups of
        several clusters, each probed by its own exporter, make one job (merge_jobs)."""
        cfg: dict[str, Any] = {
            "job_name": job,
            "metrics_path": "/probe",
            "static_configs": [
                {"targets": targets, "labels": {**(labels or {}), EXPORTER_LABEL: exporter_url.split("://", 1)[1]}}
            ],
            "relabel_configs": [
                {"source_labels": ["__address__"], "target_label": "__param_target"},
                {"source_labels": ["__param_target"], "target_label": "instance"},
                {"source_labels": [EXPORTER_LABEL], "target_label": "__address__"},
            ],
        }
        if interval:
            cfg["scrape_interval"] = interval
            cfg["scrape_timeout"] = interval if float(interval.rstrip("s")) <= 15 else "15s"
        if params:
            cfg["params"] = params
        return cfg

    def _start_guests(self, part: ClusterPart) -> list[dict[str, Any]]:
        """The guest view: the guest simulator writes, per VM, the fio json+ status stream, the
        sysfs disk facts and the kernel's /proc/diskstats a real guest would show; one fio exporter
        per VM reads the first two unchanged (as one would run inside each guest), scraped as job
        "fio", and one real node_exporter per VM (diskstats collector only) reads the guest's
        procfs, sysfs and udev database, scraped as job "guest-node"; both with the target label
        ``vm``. The host's own node_exporter stays job "node"."""
        guests = part.workdir / "guests"
        manifest = part.workdir / "guests.json"
        manifest.unlink(missing_ok=True)
        sim = self._start(
            part.proc("guest-simulator"),
            [
                BIN / "ioparallax-guest-simulator",
                part.scenario,
                "--dir",
                guests,
                "--manifest",
                manifest,
            ],
        )
        deadline = time.monotonic() + 30
        while not manifest.exists():
            if not sim.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the guest simulator did not start:\n{sim.tail()}")
            time.sleep(0.1)
        paths: dict[str, dict[str, str]] = json.loads(manifest.read_text())
        cache = part.trace.scenario.cluster.dram_cache_bytes
        label = self.resolved_cluster_label()
        static: list[dict[str, Any]] = []
        node_static: list[dict[str, Any]] = []
        windows_static: list[dict[str, Any]] = []
        procs = []
        taken: set[int] = set()

        def port_for(name: str, preferred: bool = False) -> int:
            # exporters not yet listening: do not hand out a port twice
            port = pick_port(name, self.fixed_ports and preferred)
            while port in taken:
                port = free_port()
            taken.add(port)
            return port

        first_fio = True
        for vm, where in paths.items():
            if "windows" in where:
                # The Windows guest OS view: windows_exporter's metrics, written by the guest
                # simulator as a textfile and served by node_exporter's textfile collector (no
                # windows_exporter runs on Linux; the names, labels and types are its).
                port = port_for("guest-windows")
                proc = self._start(
                    part.proc(f"guest-windows-exporter-{vm}"),
                    [
                        "prometheus-node-exporter",
                        f"--web.listen-address=127.0.0.1:{port}",
                        "--collector.disable-defaults",
                        "--collector.textfile",
                        f"--collector.textfile.directory={where['windows']}",
                    ],
                    url=f"http://127.0.0.1:{port}",
                )
                procs.append(proc)
                windows_static.append({"targets": [f"127.0.0.1:{port}"], "labels": part.labels(label, vm=vm)})
                continue
            port = port_for("fio-exporter", first_fio)
            first_fio = False
            # Every Linux guest gets a fio exporter: its sysfs disk facts (fio_guest_disk_info) join
            # the guest OS view to the VM disks even where another tool than fio runs.
            watch = [f"--fio.watch={where['stream']}"] if "stream" in where else []
            proc = self._start(
                part.proc(f"fio-exporter-{vm}"),
                [
                    BIN / "fio-exporter",
                    "serve",
                    f"--web.listen-address=127.0.0.1:{port}",
                    *watch,
                    f"--fio.host={vm}",
                    f"--collector.sysfs={where['sysfs']}",
                    f"--fio.cache-size={cache}",
                    f"--fio.scrape-interval={self.fio_scrape_interval or self.scrape_interval}",
                ],
                url=f"http://127.0.0.1:{port}",
            )
            procs.append(proc)
            static.append({"targets": [f"127.0.0.1:{port}"], "labels": part.labels(label, vm=vm)})
            # The guest OS view: node_exporter's diskstats collector on the guest's /proc/diskstats.
            # Its default --collector.diskstats.device-exclude keeps sdb and drops the partition sdb1.
            port = port_for("guest-node-exporter")
            proc = self._start(
                part.proc(f"guest-node-exporter-{vm}"),
                [
                    "prometheus-node-exporter",
                    f"--web.listen-address=127.0.0.1:{port}",
                    f"--path.procfs={where['procfs']}",
                    f"--path.sysfs={where['sysfs']}",
                    f"--path.udev.data={where['udev']}",
                    "--collector.disable-defaults",
                    "--collector.diskstats",
                ],
                url=f"http://127.0.0.1:{port}",
            )
            procs.append(proc)
            node_static.append({"targets": [f"127.0.0.1:{port}"], "labels": part.labels(label, vm=vm)})
        jobs: list[dict[str, Any]] = []
        results = sorted({where["diskspd"] for where in paths.values() if "diskspd" in where})
        if results:
            # DiskSPD's results, copied off the Windows guests to one directory on a collector host:
            # one diskspd exporter reads them all. Retention keeps the last few runs (the rules take
            # each host's newest); its scrape interval is the demo's.
            port = port_for("diskspd-exporter", True)
            proc = self._start(
                part.proc("diskspd-exporter"),
                [
                    BIN / "diskspd-exporter",
                    "serve",
                    f"--web.listen-address=127.0.0.1:{port}",
                    *(f"--diskspd.watch={r}" for r in results),
                    "--diskspd.retention=5m",
                    f"--diskspd.cache-size={cache}",
                    f"--diskspd.scrape-interval={self.scrape_interval}",
                ],
                url=f"http://127.0.0.1:{port}",
            )
            procs.append(proc)
            jobs.append(
                {
                    "job_name": "diskspd",
                    "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": part.labels(label)}],
                }
            )
        outputs = sorted({where["vdbench"] for where in paths.values() if "vdbench" in where})
        if outputs:
            # vdbench's multi-host run (the controller's output directories, one per run): one
            # vdbench exporter follows them live, scraped with the demo's interval.
            port = port_for("vdbench-exporter", True)
            proc = self._start(
                part.proc("vdbench-exporter"),
                [
                    BIN / "vdbench-exporter",
                    "serve",
                    f"--web.listen-address=127.0.0.1:{port}",
                    *(f"--vdbench.watch={o}" for o in outputs),
                    f"--vdbench.cache-size={cache}",
                    f"--vdbench.scrape-interval={self.scrape_interval}",
                ],
                url=f"http://127.0.0.1:{port}",
            )
            procs.append(proc)
            jobs.append(
                {
                    "job_name": "vdbench",
                    "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": part.labels(label)}],
                }
            )
        for proc in procs:
            self._wait_http(proc, "/metrics")
        if static:
            job: dict[str, Any] = {"job_name": "fio", "static_configs": static}
            if self.fio_scrape_interval:
                job["scrape_interval"] = job["scrape_timeout"] = self.fio_scrape_interval
            jobs.append(job)
        if node_static:
            jobs.append({"job_name": "guest-node", "static_configs": node_static})
        if windows_static:
            jobs.append({"job_name": "guest-windows", "static_configs": windows_static})
        return jobs

    def _start_node_exporter(self) -> list[dict[str, Any]]:
        port = pick_port("node-exporter", self.fixed_ports)
        # No systemd bus in containers and CI: its collector would only log errors.
        proc = self._start(
            "node-exporter",
            ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}", "--no-collector.systemd"],
            url=f"http://127.0.0.1:{port}",
        )
        self._wait_http(proc, "/metrics")
        return [self._exporter_scrape("node", proc.url)]

    def _start_alertmanager(self) -> None:
        port = pick_port("alertmanager", self.fixed_ports)
        receivers: list[dict[str, Any]] = [{"name": "null"}]
        route: dict[str, Any] = {
            "receiver": "null",
            "group_by": [self.cluster_label or "cluster", "alertname", "vm", "vdisk_id", "job"],
            "group_wait": "5s",
            "group_interval": "10s",
            "repeat_interval": "1h",
        }
        if self.alertmanager_webhook:
            receivers = [
                {"name": "webhook", "webhook_configs": [{"url": self.alertmanager_webhook, "send_resolved": True}]}
            ]
            route["receiver"] = "webhook"
        cfg = {"route": route, "receivers": receivers}
        path = self.workdir / "alertmanager.yml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        data = self.workdir / "alertmanager-data"
        data.mkdir(exist_ok=True)
        proc = self._start(
            "alertmanager",
            [
                "prometheus-alertmanager",
                f"--config.file={path}",
                f"--storage.path={data}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
            ],
            url=f"http://127.0.0.1:{port}",
        )
        self._wait_http(proc, "/-/ready")

    def rule_files(self) -> list[Path]:
        rules_dir = self.rules_dir if self.rules_dir is not None else ALERTS_DIR
        rules = sorted(rules_dir.glob("*.rules.yml")) + sorted(rules_dir.glob("*.rules.yaml"))
        return rules + list(self.extra_rule_files)

    def _start_victoria_metrics(self) -> None:
        """Single-node VictoriaMetrics (Debian's ``victoria-metrics``), its data in the run dir,
        emptied at each start as Prometheus' is."""
        if shutil.which("victoria-metrics") is None:
            raise RuntimeError("victoria-metrics is not installed: run `make deps` (Debian package victoria-metrics)")
        port = pick_port("victoria-metrics", self.fixed_ports)
        data = self.workdir / "victoria-metrics-data"
        shutil.rmtree(data, ignore_errors=True)
        proc = self._start(
            "victoria-metrics",
            [
                "victoria-metrics",
                f"-httpListenAddr=127.0.0.1:{port}",
                f"-storageDataPath={data}",
                "-retentionPeriod=1d",
            ],
            url=f"http://127.0.0.1:{port}",
        )
        self._wait_http(proc, "/health")

    def _start_prometheus(self, scrape: list[dict[str, Any]]) -> None:
        port = pick_port("prometheus", self.fixed_ports)
        # The fio exporter serves its target data on /metrics, so it is scraped once, as "fio".
        exporters = [
            {"targets": part.exporters, "labels": part.labels(self.resolved_cluster_label())}
            for part in self.clusters
            if part.exporters
        ]
        if exporters:
            scrape.append({"job_name": "ioparallax-exporters", "static_configs": exporters})
        cfg = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "evaluation_interval": self.evaluation_interval,
                "scrape_timeout": self.scrape_interval,
            },
            "alerting": {
                "alertmanagers": [{"static_configs": [{"targets": [self.urls["alertmanager"].split("://", 1)[1]]}]}]
            },
            "rule_files": [str(p) for p in self.rule_files()],
            "scrape_configs": scrape,
        }
        if "victoria-metrics" in self.urls:
            cfg["remote_write"] = [remote_write_config(self.urls["victoria-metrics"])]
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        check = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"promtool rejected the generated {path}:\n{check.stdout}{check.stderr}")
        data = self.workdir / "prometheus-data"
        shutil.rmtree(data, ignore_errors=True)
        proc = self._start(
            "prometheus",
            [
                "prometheus",
                f"--config.file={path}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
                # scrape_timeout_seconds per target, for the IoparallaxScrapeSlow alert
                "--enable-feature=extra-scrape-metrics",
                "--storage.tsdb.retention.time=1d",
                *self.prometheus_flags,
            ],
            url=f"http://127.0.0.1:{port}",
        )
        self._wait_http(proc, "/-/ready")

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
        label = self.cluster_label or "cluster"
        if self.named_clusters:
            lines = [
                f"ioparallax demo, {len(self.clusters)} simulated clusters in one Prometheus (target label {label}):"
            ]
            lines.extend(
                f"  {label}={p.cluster:20} scenario {p.trace.scenario.name!r} ({_hypervisor(p)}): "
                f"{p.trace.scenario.summary}"
                for p in self.clusters
            )
            lines.append("")
        else:
            lines = [
                f"ioparallax demo, scenario {self.scenario!r} ({_hypervisor(self.clusters[0])}): "
                f"{self.trace.scenario.summary}",
                "",
            ]
        for name, url in self.urls.items():
            lines.append(f"  {name:28} {url}")
        lines.append("")
        lines.append("Targets:")

        def where(labels: dict[str, str]) -> str:
            return f"{labels[label]}/" if labels.get(label) else ""

        width = max((len(f"{label}={c}  ") for c in self.named_clusters), default=0)
        for t in sorted(
            self.targets(),
            key=lambda t: (t["labels"].get(label, ""), t["labels"].get("job", ""), t["labels"].get("instance", "")),
        ):
            up = {"up": "UP  ", "down": "DOWN"}.get(t["health"], t["health"].upper())
            err = f"  ({t['lastError']})" if t.get("lastError") else ""
            vm = f"  vm={t['labels']['vm']}" if t["labels"].get("vm") else ""
            cl = (f"{label}={t['labels'][label]}" if t["labels"].get(label) else "").ljust(width)
            lines.append(f"  {up} {cl}{t['labels'].get('job', ''):24} {t['labels'].get('instance', '')}{vm}{err}")
        for q, what in (
            ("stargate_up", "Stargate"),
            ("vcenter_up", "vCenter"),
            ("prism_up", "Prism"),
            ("fio_up", "fio (per VM)"),
        ):
            try:
                res = self.query(q)
            except requests.RequestException:
                continue
            if res:
                res.sort(
                    key=lambda r: (
                        r["metric"].get(label, ""),
                        r["metric"].get("vm", ""),
                        r["metric"].get("instance", ""),
                    )
                )
                ups = ", ".join(
                    f"{where(r['metric'])}{r['metric'].get('vm') or r['metric'].get('instance', '?')}={r['value'][1]}"
                    for r in res
                )
                lines.append(f"  {what} probes: {ups}")
        lines.append("")
        lines.extend(self._where_to_look(label))
        lines.append("")
        lines.append("The PoC report (verdicts per VM disk, the three views per disk, one HTML file; docs/report.md):")
        if self.named_clusters:
            for c in self.named_clusters:
                lines.append(
                    f"  .venv/bin/ioparallax-report --prometheus {self.urls['prometheus']} --start -30m "
                    f"--match '{{{label}=\"{c}\"}}' -o report-{c}.html"
                )
        else:
            lines.append(f"  make report REPORT_PROMETHEUS={self.urls['prometheus']}   (writes .run/report.html)")
            lines.append(
                f"  .venv/bin/ioparallax-report --prometheus {self.urls['prometheus']} --start -30m "
                "-o report.html --pdf report.pdf"
            )
        lines.append("")
        if "victoria-metrics" in self.urls:
            lines.extend(long_term_lines(self.urls["victoria-metrics"], self.long_term_rows()))
            lines.append("")
        alerts = self.alerts()
        firing = [a for a in alerts if a["state"] == "firing"]
        pending = [a for a in alerts if a["state"] == "pending"]
        lines.append(f"Firing alerts: {len(firing)}{self._per_cluster_counts(firing, label)}")
        lines.extend(f"  {alert_line(a, label)}" for a in firing)
        if pending:
            lines.append(
                f"Pending alerts: {len(pending)}{self._per_cluster_counts(pending, label)} (they fire once "
                "their condition has held for the rule's `for`; new firings are printed below as they happen)"
            )
            lines.extend(f"  {alert_line(a, label)}" for a in pending)
        lines.append("")
        lines.append(self.dashboards_report())
        return "\n".join(lines)

    def _per_cluster_counts(self, alerts: list[dict[str, Any]], label: str) -> str:
        """' (poc-a: 3, poc-b: 0)' for a stack of several clusters, '' for one."""
        if not self.named_clusters:
            return ""
        return (
            " ("
            + ", ".join(f"{c}: {sum(1 for a in alerts if a['labels'].get(label) == c)}" for c in self.named_clusters)
            + ")"
        )

    def _where_to_look(self, label: str) -> list[str]:
        """Links to Prometheus' graph page; every by/on keeps the cluster label (ioparallax/mixin/cluster.py), so
        two clusters' equal vdisk ids stay apart."""
        from ioparallax.mixin.cluster import per_cluster

        looks = [
            (
                "storage: zero share of reads per vdisk",
                'sum by (vdisk_id) (stargate_vdisk_read_source_bytes_per_second{source=~"zero|estore_zero|oplog_zero"})'
                " / sum by (vdisk_id) (stargate_vdisk_read_source_bytes_per_second)",
            ),
            (
                "VM: the latest sample (vCenter 20 s, Prism 30 s) beside the true average",
                "vcenter_virtual_disk_sample_write_bytes_per_second or rate(vcenter_virtual_disk_write_bytes_total[1m])"
                " or prism_virtual_disk_sample_write_bytes_per_second or rate(prism_virtual_disk_write_bytes_total[1m])",
            ),
            (
                "VM: where each VM disk's VM view comes from (vcenter, prism) and its sample period",
                "vm_disk:ioparallax_vm_source:info * on (vm, disk) group_left () "
                "vm_disk:ioparallax_vm_sample_interval:seconds",
            ),
            ("guest: fio hygiene findings", "fio_job_hygiene_problem == 1"),
            (
                "guest: DiskSPD and vdbench hygiene findings",
                "diskspd_target_hygiene_problem == 1 or vdbench_run_hygiene_problem == 1",
            ),
            ("guest: which tool measured each VM disk", "vm_disk:ioparallax_guest_tool:info"),
            (
                "all three views: bytes/s per VM disk (guest = fio/DiskSPD/vdbench, vm = vCenter or Prism, storage = Stargate)",
                '{__name__=~"vm_disk:ioparallax_(guest|vm|storage)_(read|write)_bytes:(rate|avg)1m"}',
            ),
            (
                "guest: the tool's ops beside the guest OS's requests (node_exporter: 1 MiB I/O is split in two; "
                "windows_exporter: counted once)",
                '{__name__=~"vm_disk:ioparallax_guest(_os)?_(read|write)_ops:rate1m"}',
            ),
            (
                "all three views: op-weighted latency per VM disk",
                '{__name__=~"vm_disk:ioparallax_(guest|vm|storage)_(read|write)_latency_seconds:(mean|avg)1m"}',
            ),
        ]
        if self.named_clusters:
            looks += [
                (
                    "the comparison: each cluster's guest and storage bytes/s, summed over its VM disks",
                    'sum by (__name__) ({__name__=~"vm_disk:ioparallax_(guest|storage)_(read|write)_bytes:(rate|avg)1m"})',
                ),
                (
                    "the comparison: each cluster's mean guest write latency over its VM disks",
                    "avg by () (vm_disk:ioparallax_guest_write_latency_seconds:mean1m)",
                ),
            ]
        lines = ["Where to look (Prometheus graph):"]
        for what, q in looks:
            q = per_cluster(q, label)
            lines.append(f"  {what}:\n    {self.urls['prometheus']}/graph?g0.expr={quote(q)}&g0.tab=0")
        return lines

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

    def dashboards_report(self) -> str:
        """How many of the dashboards' queries return data now, for the first VM disk that all three
        views know (what Grafana would show with the variables on it), per cluster."""
        from ioparallax.mixin.queries import dashboard_coverage

        blocks = []
        clusters: list[str | None] = [*self.named_clusters] or [None]
        for cluster in clusters:
            at = f"cluster {cluster}, " if cluster else ""
            try:
                cov = dashboard_coverage(
                    self.query,
                    rate_interval="1m",
                    interval=self.scrape_interval,
                    cluster=cluster,
                    cluster_label=self.cluster_label,
                )
            except (requests.RequestException, OSError, ValueError, KeyError) as exc:
                blocks.append(f"Dashboards ({at.rstrip(', ')}): could not run their queries: {exc}")
                continue
            if cov is None:
                blocks.append(
                    f"Dashboards ({at}no VM disk is known to all three views yet: the identity joins "
                    "need a few scrapes)"
                )
                continue
            ahv = any(p.ahv for p in self.clusters if p.cluster == cluster)
            blocks.append(self._coverage_lines(cov, at, ahv))
        return "\n".join(blocks)

    @staticmethod
    def _coverage_lines(cov: Any, at: str, ahv: bool = False) -> str:
        from ioparallax.mixin.vmview import vcenter_only

        v = cov.values
        lines = [
            f"Dashboards (dashboards/*.json, {at}for {v['vm']} {v['disk']}, vdisk {v['vdisk']}): "
            f"{cov.with_data} of {cov.total} queries return data now"
        ]
        empty = cov.empty
        if ahv:
            # Outstanding I/Os, I/O size samples and seeks are vCenter's only: no data on AHV by design.
            only = [e for e in empty if vcenter_only(e.expr)]
            empty = [e for e in empty if not vcenter_only(e.expr)]
            if only:
                lines.append(
                    f"  {len(only)} vCenter-only queries (outstanding I/Os, I/O size samples, seeks) "
                    "have no Prism counterpart on this AHV cluster"
                )
        for e in empty[:10]:
            lines.append(f"  no data yet: {e.where}")
        if len(empty) > 10:
            lines.append(f"  ... and {len(empty) - 10} more")
        if empty:
            lines.append(
                "  (a direction this disk does not do, an alert that has not fired, or 1m windows still filling)"
            )
        return "\n".join(lines)


def _hypervisor(part: ClusterPart) -> str:
    return "AHV, VM view from Prism" if part.ahv else "ESXi, VM view from vCenter"


def alert_line(a: dict[str, Any], cluster_label: str = "cluster") -> str:
    lab = a["labels"]
    where = ", ".join(f"{k}={lab[k]}" for k in (cluster_label, "vm", "disk", "vdisk_id", "job") if k in lab)
    return f"{lab.get('severity', ''):8} {lab['alertname']}  {where}"


def long_term_lines(store_url: str, rows: float | None = None) -> list[str]:
    """The demo report's lines for the long-term store (Debian's build has no web UI, vmui: its
    Prometheus-compatible API is what Grafana, the report and curl query)."""
    q = '{__name__=~"vm_disk:ioparallax_(guest|vm|storage)_(read|write)_bytes:(rate|avg)1m"}'
    return [
        "Where to look (long-term store: VictoriaMetrics, remote_write target of Prometheus, raw and recorded series;",
        "its Prometheus-compatible API is a Grafana Prometheus data source URL; the last 30 s are not served yet):",
        f"  query URL (Grafana data source): {store_url}",
        f"  all three views, as stored long-term:\n    {store_url}/api/v1/query?query={quote(q)}",
        f"  samples received so far: {'unknown' if rows is None else f'{rows:,.0f}'} "
        f'({store_url}/metrics, vm_rows_inserted_total{{type="promremotewrite"}})',
    ]


def remote_write_config(store_url: str) -> dict[str, Any]:
    """Prometheus' remote_write to VictoriaMetrics: every series it appends, the scraped (raw) ones
    and those its rules record (ALERTS included), with no write_relabel_configs to drop any."""
    return {
        "url": f"{store_url}/api/v1/write",
        "name": "victoria-metrics",
        # Send within a second (the default 5 s deadline only adds lag at demo scale).
        "queue_config": {"batch_send_deadline": "1s"},
    }


def quick_alert_for() -> dict[str, str]:
    """``--quick-alerts``: the mixin config's ``for`` durations, short enough for a demo."""
    from ioparallax.mixin.config import ForDurations

    # The views-disagree alerts keep 2m: they judge 5m rates, which a young stack covers only in
    # part, where one burst more or less in one view's window than in another's moves the ratio.
    # The burst alert keeps 1m: with 20 s vCenter scrapes a 1m window integrates two or three
    # samples, so for 20 s of every minute it misses a once-a-minute checkpoint (postgres) and
    # the Little's-law ratio jumps; a 15 s `for` would fire and resolve every minute.
    return dict.fromkeys(ForDurations.__dataclass_fields__, "15s") | {"views_disagree": "2m", "burst": "1m"}


def write_quick_alert_rules(out: Path) -> Path:
    """The rule files with :func:`quick_alert_for` durations, written to ``out``."""
    from ioparallax.mixin.config import load_config
    from ioparallax.mixin.rules.files import write_rule_files

    write_rule_files(
        load_config(overrides={"for": quick_alert_for()}), out, "ioparallax/mixin/config.yml (--quick-alerts)"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    from ioparallax.exporters.common.config import ConfigError
    from ioparallax.simulators.scenario import list_scenarios
    from ioparallax.version import add_version_arg

    parser = argparse.ArgumentParser(
        prog="ioparallax-demo",
        description="Start a simulated cluster and the real monitoring stack on 127.0.0.1, print where to look, "
        "and stop everything on Ctrl-C. Several scenarios run as several clusters in one Prometheus "
        "(docs/compare.md).",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="SCENARIO[@CLUSTER][,...]",
        help="scenario name or YAML file (default zero-heavy; library: "
        f"{', '.join(list_scenarios())}). Repeated or comma-separated: one simulated cluster "
        "per scenario (its own CVMs, vCenter and guests) in one Prometheus, every target "
        "labelled cluster=<the scenario's name>, or the name after @ "
        "(zero-heavy@poc-a,zero-heavy@poc-b runs one scenario twice; clean-oltp@esxi,clean-oltp-ahv@ahv "
        "runs one workload on ESXi and AHV: an AHV scenario's VM view comes from Prism)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=workspace() / ".run" / "demo",
        help="state, generated configs and logs (default: %(default)s)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=0,
        help="stop this many seconds after the status report instead of waiting for Ctrl-C (0: wait)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=70,
        help="seconds to let Prometheus scrape and evaluate before the status report: the rules' "
        "1m windows fill in about a minute (default %(default)s)",
    )
    parser.add_argument(
        "--long-term",
        action="store_true",
        help="also start VictoriaMetrics (Debian's victoria-metrics, single node, its data in the "
        "workdir) and make it Prometheus' remote_write target for the raw and recorded series; "
        "its query URL is printed with the report",
    )
    parser.add_argument(
        "--quick-alerts",
        action="store_true",
        help="load the rules with `for` at 15s (burst: 1m, views-disagree: 2m) instead of the shipped "
        "minutes, so a demo shows its alerts firing within a minute or two",
    )
    parser.add_argument(
        "--from-start",
        action="store_true",
        help="start each scenario's period with the demo (scaling-ramp begins at one VM) instead of "
        "where the wall clock puts it "
        "(period second = Unix time mod period)",
    )
    add_version_arg(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    scenarios = args.scenario or ["zero-heavy"]
    try:
        for scenario, _ in cluster_specs(scenarios):
            load_scenario(scenario)
    except (ValueError, ConfigError) as exc:
        parser.error(str(exc))

    rules_dir = None
    if args.quick_alerts:
        rules_dir = write_quick_alert_rules(args.workdir / "rules")
    stack = Stack(
        scenarios=scenarios,
        workdir=args.workdir,
        rules_dir=rules_dir,
        long_term=args.long_term,
        from_start=args.from_start,
    )
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        print(
            f">> starting the demo stack (scenario {','.join(scenarios)}); logs in {args.workdir / 'logs'}", flush=True
        )
        stack.start()
        stack.wait_scraped(timeout=60)
        time.sleep(args.settle)
        print(stack.report(), flush=True)
        print("\nPress Ctrl-C to stop everything." if not args.duration else "", flush=True)
        deadline = time.monotonic() + args.duration if args.duration else None
        label = stack.resolved_cluster_label()
        seen = {alert_line(a, label) for a in stack.alerts() if a["state"] == "firing"}
        next_poll = time.monotonic() + 5
        while deadline is None or time.monotonic() < deadline:
            for proc in stack.procs:
                if not proc.alive():
                    print(f"!! {proc.name} exited with code {proc.popen.returncode}:\n{proc.tail()}", flush=True)
                    return 1
            if time.monotonic() >= next_poll:
                next_poll = time.monotonic() + 5
                try:
                    now = {alert_line(a, label) for a in stack.alerts() if a["state"] == "firing"}
                except requests.RequestException:
                    now = seen
                for line in sorted(now - seen):
                    print(f">> firing: {line.strip()}", flush=True)
                for line in sorted(seen - now):
                    print(f">> resolved: {line.strip()}", flush=True)
                seen = now
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    except (RuntimeError, TimeoutError, ValueError) as exc:
        print(f"!! {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        print(">> stopping", flush=True)
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
