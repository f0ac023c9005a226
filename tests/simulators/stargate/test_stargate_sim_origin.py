"""With a scenario origin ``o`` (period second 0 at Unix time ``o``) every Stargate page at wall-clock
``x`` is the page at ``x - o`` with origin 0: hosting and moves, the per-vdisk pages, /h/vars'
counters since the start, Prism's virtual disks. Only the start time the main page prints (a wall
clock's) differs."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ioparallax.simulators.scenario import load_scenario
from ioparallax.simulators.stargate.server import StargateCluster

from .stargate_sim_helpers import moving_scenario

# A multiple of 60 s (the Prism path's 30 s samples keep their wall-clock grid), not of a period (300,
# 600, 960 s): a page that ignored the origin would be 120, 420 or 180 s of its period off.
ORIGIN = 1_700_000_820
X = 1_800_000_123
# The main page's rows that print the start time (wall clock): "Start time" and "Incarnation id".
WALL_ROWS = re.compile(r"<tr><td><b>(Start time|Incarnation id)</b></td><td>[^<]*</td></tr>\n")


class Clock:
    def __init__(self, t: float):
        self.t = float(t)

    def __call__(self) -> float:
        return self.t


def pair(scenario):
    """The same scenario without and with the origin, their Stargate started ``ORIGIN`` apart."""
    started = X - 5000
    plain = StargateCluster(scenario, clock=Clock(started - ORIGIN), history_start=started - ORIGIN)
    moved = StargateCluster(dataclasses.replace(scenario, origin=ORIGIN), clock=Clock(started), history_start=started)
    return plain, moved


@pytest.mark.parametrize("scenario", ["scaling-ramp", "clean-oltp", "ilm-upmigration", "moving"])
def test_every_page_is_the_origin_0_page_shifted(scenario):
    sc = moving_scenario() if scenario == "moving" else load_scenario(scenario)
    plain, moved = pair(sc)
    differs = False
    for x in range(X, X + sc.period_s, 53):
        assert moved.period_second(x) == plain.period_second(x - ORIGIN)
        assert moved.prism_virtual_disks(x) == plain.prism_virtual_disks(x - ORIGIN)
        for cvm in sc.cluster.cvms:
            assert moved.hosted(cvm, x) == plain.hosted(cvm, x - ORIGIN)
            assert moved.vars_lines(cvm, x) == plain.vars_lines(cvm, x - ORIGIN), (scenario, cvm, x)
            assert moved.render_detail(cvm, None, x) == plain.render_detail(cvm, None, x - ORIGIN)
            page, page0 = moved.render_main(cvm, x), plain.render_main(cvm, x - ORIGIN)
            assert WALL_ROWS.sub("", page) == WALL_ROWS.sub("", page0), (scenario, cvm, x)
            assert len(WALL_ROWS.findall(page)) == 2
            differs = differs or moved.vars_lines(cvm, x) != plain.vars_lines(cvm, x)
    assert differs, "the origin changed no page: the Stargate simulator ignores it"


def test_a_move_happens_at_its_period_second_after_the_origin():
    sc = dataclasses.replace(moving_scenario(), origin=ORIGIN)  # vdisk 1000 moves to cvm-2 at 300 s
    sim = StargateCluster(sc, clock=Clock(ORIGIN), history_start=ORIGIN)
    assert [d.vdisk_id for d in sim.hosted("cvm-1", ORIGIN + 299)] == [1000]
    assert [d.vdisk_id for d in sim.hosted("cvm-2", ORIGIN + 300)] == [1000]
    assert [d.vdisk_id for d in sim.hosted("cvm-1", ORIGIN + 600)] == [1000]  # the next period
