"""Shared helpers for the Stargate simulator tests: scenarios varied from the library."""

from __future__ import annotations

import copy

from ioparallax.simulators.scenario.model import Scenario, parse_scenario, scenario_path
from ioparallax.yamlconf import load_yaml

# A fixed wall-clock second: 1_700_000_000 is period second 200 of a 600 s period.
EPOCH = 1_700_000_000


def variant(name: str, **cluster: object) -> Scenario:
    """A library scenario with cluster keys overridden (e.g. page_build=2014)."""
    data = copy.deepcopy(load_yaml(scenario_path(name)))
    data["cluster"].update(cluster)
    return parse_scenario(data, f"<{name} variant>")


def moving_scenario(page_build: int = 2016) -> Scenario:
    """Two VMs; vdisk 1000 moves from cvm-1 to cvm-2 at 300 s (and back at each period start)."""
    stream = {
        "name": "oltp",
        "read_iops": 1000,
        "write_iops": 500,
        "size": "4KiB",
        "read_latency": "500us",
        "write_latency": "2ms",
        "working_set": "500GiB",
    }
    return parse_scenario(
        {
            "name": "moving",
            "period": "600s",
            "cluster": {"cvms": ["cvm-1", "cvm-2", "cvm-3"], "page_build": page_build},
            "vms": [
                {
                    "name": "mover",
                    "disks": [{"cvm": "cvm-1", "moves": [{"at": "300s", "to": "cvm-2"}], "streams": [stream]}],
                },
                {"name": "stayer", "disks": [{"cvm": "cvm-3", "streams": [stream]}]},
            ],
        },
        "<moving>",
    )
