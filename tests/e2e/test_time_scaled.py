"""The time-scaled scenario copy the e2e stacks run (tests/e2e/stacks.py ``time_scaled_scenario``):
scaling-ramp at 0.875 is the library ramp with a VM every 105 s (the first level 40 s longer) and
the same law. Runs without
starting any process (no ``e2e`` marker)."""

from __future__ import annotations

import pytest

from ioparallax.simulators.scenario import load_scenario
from ioparallax.simulators.scenario.trace import Trace
from tests.e2e.stacks import TIME_SCALED_SCENARIOS, time_scaled_scenario


def io_per_second(trace: Trace, t: int) -> float:
    return sum(trace.second(d, t).read_ops + trace.second(d, t).write_ops for d in trace.disks)


def test_scaling_ramp_copy_joins_a_vm_every_scaled_step_with_the_same_totals(tmp_path):
    factor, lead = TIME_SCALED_SCENARIOS["scaling-ramp"]
    library = load_scenario("scaling-ramp")
    copy = load_scenario(time_scaled_scenario("scaling-ramp", factor, tmp_path / "scaling-ramp.yaml", lead=lead))
    assert copy.name == library.name
    assert copy.expect["usl"] == {**library.expect["usl"], "step": "105s"}
    assert copy.period_s == 840 + lead
    a, b = Trace(library), Trace(copy)
    # The k-th level's total is the same, 120 s per level in the library and 105 s in the copy (the
    # first 105 s + lead); sampled in the middle of each of the eight levels and one second either
    # side of each join.
    for k in range(8):
        assert io_per_second(b, lead + 105 * k + 52) == io_per_second(a, 120 * k + 60) > 0
    assert io_per_second(b, 1) == io_per_second(a, 1)
    for k in range(1, 8):
        assert io_per_second(b, lead + 105 * k - 1) == io_per_second(a, 120 * k - 1)
        assert io_per_second(b, lead + 105 * k) == io_per_second(a, 120 * k)
        assert io_per_second(b, lead + 105 * k) != io_per_second(b, lead + 105 * k - 1)


def test_a_time_it_cannot_scale_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"bursty-1m: .*cannot scale the time of \[.*'burst'"):
        time_scaled_scenario("bursty-1m", 0.5, tmp_path / "out.yaml")


def test_db_density_copy_has_its_first_level_longer_and_the_same_totals(tmp_path):
    factor, lead = TIME_SCALED_SCENARIOS["db-density"]
    library = load_scenario("db-density")
    copy = load_scenario(time_scaled_scenario("db-density", factor, tmp_path / "db-density.yaml", lead=lead))
    assert factor == 1.0 and copy.period_s == library.period_s + lead
    assert copy.expect["density"] == library.expect["density"]
    assert [vm.application for vm in copy.vms] == [vm.application for vm in library.vms]
    a, b = Trace(library), Trace(copy)
    assert io_per_second(b, 1) == io_per_second(a, 1) and io_per_second(b, lead + 119) == io_per_second(a, 119)
    for k in range(1, 8):
        assert io_per_second(b, lead + 120 * k + 60) == io_per_second(a, 120 * k + 60) > 0


def test_a_vms_application_is_not_scaled_silently(tmp_path):
    with pytest.raises(ValueError, match=r"db-density: db-01: cannot scale the time of \['application', 'cpu'\]"):
        time_scaled_scenario("db-density", 0.5, tmp_path / "out.yaml")
