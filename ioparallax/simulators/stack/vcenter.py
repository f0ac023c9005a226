"""The VM view of an ESXi cluster: the scenario vCenter simulator and the vCenter exporter."""

from __future__ import annotations

import os
from typing import Any

import yaml

from ioparallax.simulators.process import free_port
from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.config import BUILD
from ioparallax.simulators.stack.launch import Launcher, start_exporter
from ioparallax.simulators.stack.scrape import probe_scrape


def start_vcenter(stack: Launcher, part: ClusterPart) -> list[dict[str, Any]]:
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
    env = {"IOPARALLAX_DEMO_VCENTER_PASSWORD": password}
    exp = start_exporter(stack, part, "vcenter-exporter", [f"--config.file={cfg_path}"], env=env)
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
