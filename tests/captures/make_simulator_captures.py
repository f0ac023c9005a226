"""Write this folder's captures of simulator pages again (after a change of the exporter's
metrics, review the diff of each metrics.prom before committing):

    .venv/bin/python -m tests.captures.make_simulator_captures

Each is written by the real ``stargate-exporter capture`` command against the Stargate
simulator (clock frozen) or the fault suite's fake Stargate serving mutated simulator pages, and
by ``vcenter-exporter capture`` against the scenario vCenter simulator (``make deps-go``), and by
``prism-exporter capture`` against the Prism simulator (clock frozen, pages of 1 disk).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import yaml

from ioparallax.exporters.prism.capture import capture_main as prism_capture_main
from ioparallax.exporters.stargate.capture import capture_main
from ioparallax.exporters.vcenter.capture import capture_main as vcenter_capture_main
from ioparallax.simulators.prism.server import PrismSimulator
from ioparallax.simulators.scenario import compile_scenario, load_scenario
from ioparallax.simulators.stargate.server import StargateCluster
from tests.exporters.stargate.hostile import FROZEN, HostileStargate, real_pages
from tests.exporters.stargate.test_stargate_coverage import (
    extra_detail_section,
    extra_main_column,
    extra_main_table,
    extra_source_column,
    extra_source_row,
)
from tests.exporters.stargate.test_stargate_faults import site
from tests.support import BUILD, ManagedProcess, free_port

HERE = Path(__file__).parent


def simulator_capture(name: str, build: int, discover: bool) -> None:
    sc = load_scenario(name)
    sc = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, page_build=build))
    with StargateCluster(sc, clock=lambda: FROZEN) as sim, tempfile.TemporaryDirectory() as tmp:
        ports = [int(u.rsplit(":", 1)[1]) for u in sim.urls.values()]
        cfg = Path(tmp) / "stargate.yml"
        cfg.write_text(yaml.safe_dump({"targets": ["127.0.0.1"], "discovery_ports": ports}))
        target = sim.urls["cvm-1"].split("://")[1]
        out = HERE / f"simulator-{name}-{build}.tar.gz"
        args = ["--target", target, "--config.file", str(cfg), "-o", str(out)] + (["--discover"] if discover else [])
        assert capture_main(args) == 0


def mutated_capture() -> None:
    main, details = real_pages(2)
    main = extra_main_table(extra_main_column(main))
    details = {v: extra_detail_section(extra_source_column(extra_source_row(h)), v) for v, h in details.items()}
    with HostileStargate(site(main, details)) as fake:
        out = HERE / "mutated-extra-table-row-column.tar.gz"
        assert capture_main(["--target", fake.target, "--stargate.target", "127.0.0.1", "-o", str(out)]) == 0


def vcenter_capture(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        trace.write_text(compile_scenario(load_scenario(name)).to_json())
        port = free_port()
        argv = [str(BUILD / "vcsim-scenario"), "-trace", str(trace), "-listen", f"127.0.0.1:{port}"]
        sim = ManagedProcess("vcsim-scenario", [*argv, "-username", "monitor", "-password", "capture"], Path(tmp))
        try:
            sim.wait_for_output(r"listening https://127\.0\.0\.1:\d+/sdk", timeout=120)
            cfg = Path(tmp) / "vcenter.yml"
            cfg.write_text(
                "defaults:\n  username: monitor\n  password_env: CAPTURE_VC_PASSWORD\n  insecure_skip_verify: true\n"
            )
            os.environ["CAPTURE_VC_PASSWORD"] = "capture"
            out = HERE / f"vcenter-simulator-{name}.tar.gz"
            assert (
                vcenter_capture_main(["--target", f"127.0.0.1:{port}", "--config.file", str(cfg), "-o", str(out)]) == 0
            )
        finally:
            sim.stop()


#: Prism's clock for its capture: 15 s after a 30 s boundary (the answer dates a safe sample).
PRISM_FROZEN = 1_700_030_025.0


def prism_capture(name: str) -> None:
    """The Prism simulator's answers to one probe: virtual_disks in pages of 1 (so the capture
    holds a paged list), the VM list and hosts, with basic auth."""
    with PrismSimulator(name, clock=lambda: PRISM_FROZEN, auth=("monitor", "capture")) as sim:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = Path(tmp) / "prism.yml"
            cfg.write_text(
                "defaults:\n  username: monitor\n  password_env: CAPTURE_PRISM_PASSWORD\n  scheme: http\n"
                "  page_size: 1\n"
            )
            os.environ["CAPTURE_PRISM_PASSWORD"] = "capture"
            out = HERE / f"prism-simulator-{name}.tar.gz"
            assert prism_capture_main(["--target", sim.address, "--config.file", str(cfg), "-o", str(out)]) == 0


if __name__ == "__main__":
    simulator_capture("zero-heavy", 2016, discover=True)
    simulator_capture("ilm-upmigration", 2014, discover=False)
    mutated_capture()
    vcenter_capture("postgres")
    prism_capture("noisy-neighbour")
