"""The VM view of an ESXi cluster: the scenario vCenter simulator and the vCenter exporter."""

from __future__ import annotations

import os
from typing import Any

from ioparallax.simulators.process import free_port
from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.config import BUILD
from ioparallax.simulators.stack.launch import Credentials, Launcher, start_api_exporter


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
    # The simulator's certificate is self-signed: the one explicit opt-out.
    return start_api_exporter(
        stack,
        part,
        "vcenter",
        f"127.0.0.1:{sim_port}",
        {"insecure_skip_verify": True},
        Credentials("demo@vsphere.local", "IOPARALLAX_DEMO_VCENTER_PASSWORD", password),
        stack.vcenter_scrape_interval,
    )
