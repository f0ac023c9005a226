"""Write this folder's captures of simulator pages again (after a change of the exporter's
metrics, review the diff of each metrics.prom before committing):

    .venv/bin/python -m tests.captures.make_simulator_captures

Each is written by the real ``stargate-exporter capture`` command against the Stargate
simulator (clock frozen) or the fault suite's fake Stargate serving mutated simulator pages.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import yaml

from ioparallax.exporters.stargate.capture_cli import capture_main
from ioparallax.simulators.scenario import load_scenario
from ioparallax.simulators.stargate.server import StargateCluster
from tests.stargate.hostile import FROZEN, HostileStargate, real_pages
from tests.stargate.test_stargate_coverage import (
    extra_detail_section,
    extra_main_column,
    extra_main_table,
    extra_source_column,
    extra_source_row,
)
from tests.stargate.test_stargate_faults import site

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


if __name__ == "__main__":
    simulator_capture("zero-heavy", 2016, discover=True)
    simulator_capture("ilm-upmigration", 2014, discover=False)
    mutated_capture()
