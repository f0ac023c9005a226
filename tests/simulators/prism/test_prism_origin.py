"""With a scenario origin ``o`` (period second 0 at Unix time ``o``) Prism's answers at wall-clock
``x`` are those at ``x - o`` with origin 0: the v2 virtual disks' 30 s samples and the v4 time
series (whose timestamps stay the wall clock's)."""

from __future__ import annotations

import dataclasses

import pytest

from ioparallax.simulators.prism.model import PrismModel, parse_iso_time
from ioparallax.simulators.scenario import compile_scenario, load_scenario

# A multiple of 60 s (Prism's 30 s samples, the v4 query's 60 s interval), not of a period (300, 600,
# 960 s): samples keep their grid, and a view that ignored the origin would be 120, 420 or 180 s off.
ORIGIN = 1_700_000_820
X = 1_800_000_123


def pair(name: str) -> tuple[PrismModel, PrismModel]:
    sc = load_scenario(name)
    moved = dataclasses.replace(sc, origin=ORIGIN)
    return PrismModel(sc, compile_scenario(sc)), PrismModel(moved, compile_scenario(moved))


@pytest.mark.parametrize("name", ["scaling-ramp", "noisy-neighbour"])
def test_samples_are_the_origin_0_samples_shifted(name):
    plain, moved = pair(name)
    differs = False
    for x in range(X, X + plain.trace.period, 47):
        assert moved.virtual_disks(x) == plain.virtual_disks(x - ORIGIN), (name, x)
        differs = differs or moved.virtual_disks(x) != plain.virtual_disks(x)
    assert differs, "the origin changed no Prism sample: the Prism simulator ignores it"
    for d in plain.scenario.disks:
        vm, disk = plain.vm_uuids[d.vm], d.vdisk_uuid
        a = plain.v4_disk_stats(vm, disk, X - ORIGIN - 900, X - ORIGIN, 60, "AVG")
        b = moved.v4_disk_stats(vm, disk, X - 900, X, 60, "AVG")
        assert a is not None and b is not None
        rows_a, rows_b = a["data"]["stats"], b["data"]["stats"]
        assert [parse_iso_time(r["timestamp"]) for r in rows_b] == [
            parse_iso_time(r["timestamp"]) + ORIGIN for r in rows_a
        ]
        assert [{k: v for k, v in r.items() if k != "timestamp"} for r in rows_b] == [
            {k: v for k, v in r.items() if k != "timestamp"} for r in rows_a
        ]
