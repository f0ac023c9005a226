"""The VM view of an ESXi cluster: the scenario vCenter simulator and the vCenter exporter."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import yaml

from ioparallax.simulators.process import free_port
from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.config import BIN, BUILD, pick_port
from ioparallax.simulators.stack.scrape import probe_scrape

if TYPE_CHECKING:
    from ioparallax.simulators.stack.core import Stack


def start_vcenter(stack: Stack, part: ClusterPart) -> list[dict[str, Any]]:
    """The scenario vCenter simulator (Go, govmomi) and the vCenter exporter probing it."""
    binary = BUILD / "vcsim-scenario"
    if not binary.is_file() or binary.stat().st_size == 0:
        raise RuntimeError(f"{binary} is missing: run `make deps` (it builds the vCenter simulator)")
    trace_file = part.workdir / "trace.json"
    trace_file.write_text(part.trace.to_json())
    sim_port = free_port()
    password = "demo-" + os.urandom(6).hex()  # a fresh one per run; never printed
    sim = stack.spawn(
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
    stack.wait_http(sim, "/about", timeout=120)
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
    port = pick_port("vcenter-exporter", stack.fixed_ports)
    exp = stack.spawn(
        part.proc("vcenter-exporter"),
        [
            BIN / "vcenter-exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--config.file={cfg_path}",
        ],
        url=f"http://127.0.0.1:{port}",
        env={"IOPARALLAX_DEMO_VCENTER_PASSWORD": password},
    )
    stack.wait_http(exp, "/metrics")
    part.exporters.append(exp.url.split("://", 1)[1])
    return [
        probe_scrape(
            "vcenter",
            exp.url,
            [f"127.0.0.1:{sim_port}"],
            interval=stack.vcenter_scrape_interval,
            labels=part.labels(stack.resolved_cluster_label()),
        )
    ]
