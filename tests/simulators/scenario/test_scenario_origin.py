"""A scenario's origin (the Unix time at which period second 0 falls) shifts every view by exactly the
origin: the trace's time helpers and the storage view at wall-clock ``x`` with origin ``o`` are those
at ``x - o`` with origin 0. The default origin, 0, is the Unix epoch (what the views always did)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ioparallax.simulators.guest.periodic import periodic_sum, prefix_sums
from ioparallax.simulators.scenario import (
    compile_scenario,
    list_scenarios,
    load_scenario,
    parse_scenario,
    write_with_origin,
)
from ioparallax.simulators.scenario.storage import StorageModel
from ioparallax.yamlconf import ConfigError

# Not a multiple of any library period (300, 600, 960 s) nor of vCenter's 20 s: a view that ignored
# the origin would be off by 7 s, 313 s or 913 s of its period.
ORIGIN = 1_700_000_913
X = 1_800_000_123  # a wall-clock time well after the origin


def shifted(name: str, origin: int = ORIGIN):
    sc = load_scenario(name)
    return compile_scenario(sc), compile_scenario(dataclasses.replace(sc, origin=origin))


def test_the_default_origin_is_the_epoch():
    trace = compile_scenario(load_scenario("scaling-ramp"))
    assert trace.origin == 0
    assert trace.now(X) == trace.period_second(X) == X % 960
    assert trace.period_start(X) == X - X % 960
    assert trace.period_index(X) == X // 960
    assert json.loads(trace.to_json())["origin_seconds"] == 0


def test_period_second_zero_falls_at_the_origin():
    _, trace = shifted("scaling-ramp")
    assert trace.origin == ORIGIN
    assert trace.period_second(ORIGIN) == 0
    assert trace.period_second(ORIGIN + 0.999) == 0
    assert trace.period_second(ORIGIN - 1) == 959  # before the origin: the previous period's end
    assert trace.period_second(ORIGIN + 121) == 121
    assert trace.period_second(ORIGIN + 960 * 5 + 7) == 7
    assert trace.period_start(ORIGIN + 960 * 5 + 7) == ORIGIN + 960 * 5
    assert trace.period_index(ORIGIN + 960 * 5 + 7) == 5
    assert trace.period_index(ORIGIN - 1) == -1
    assert trace.since_origin(ORIGIN + 42.5) == 42
    assert json.loads(trace.to_json())["origin_seconds"] == ORIGIN


@pytest.mark.parametrize("name", list_scenarios())
def test_every_trace_time_helper_is_the_origin_0_one_shifted(name):
    plain, moved = shifted(name)
    p = plain.period
    prefix = prefix_sums(float((t * 7919) % 101) for t in range(p))
    for x in (X, X + 1, X + p - 1, X + 12_345, ORIGIN - 3 * p + 17, ORIGIN):
        assert moved.period_second(x) == plain.period_second(x - ORIGIN)
        assert moved.now(x) == plain.now(x - ORIGIN)
        assert moved.period_start(x) == plain.period_start(x - ORIGIN) + ORIGIN
        assert moved.period_index(x) == plain.period_index(x - ORIGIN)
        for span in (1, 20, p - 1, p, 3 * p + 11):
            assert moved.periodic_sum(prefix, x - span, x) == plain.periodic_sum(prefix, x - span - ORIGIN, x - ORIGIN)
            assert plain.periodic_sum(prefix, x - span, x) == periodic_sum(prefix, p, x - span, x)
    # The origin is not a whole number of periods: the shifted trace is somewhere else in its period.
    assert moved.period_second(X) != plain.period_second(X)


@pytest.mark.parametrize("name", ["scaling-ramp", "ilm-upmigration", "clean-oltp", "zero-heavy", "bursty-1m"])
def test_the_storage_view_is_the_origin_0_view_shifted(name):
    plain, moved = shifted(name)
    history = X - 2 * 3600  # working sets and up-migration counts see history, clipped at its start
    a = StorageModel(plain, history - ORIGIN)
    b = StorageModel(moved, history)
    differs = False
    for x in range(X, X + plain.period, 37):
        for disk in plain.disks:
            assert b.view(disk, x + 0.4) == a.view(disk, x - ORIGIN + 0.4), (name, disk.key, x)
            for si in range(len(disk.streams)):
                for span in (120, 3600):
                    assert b.active_seconds(disk, si, x, span) == a.active_seconds(disk, si, x - ORIGIN, span)
            differs = differs or b.view(disk, x) != a.view(disk, x)
    assert differs, "the origin changed no storage view: a view ignores it"


def test_origin_is_a_top_level_key_of_whole_unix_seconds(tmp_path):
    data = {
        "name": "t",
        "period": "60s",
        "origin": 1_800_000_000,
        "cluster": {"cvms": ["cvm-1"]},
        "vms": [{"name": "vm1", "disks": [{"streams": [{"read_iops": 100, "from": "0s", "to": "10s"}]}]}],
    }
    trace = compile_scenario(parse_scenario(data, "t.yaml"))
    assert trace.origin == 1_800_000_000
    assert trace.second(trace.disks[0], trace.now(1_800_000_005)).read_ops == 100
    assert trace.second(trace.disks[0], trace.now(1_800_000_015)).read_ops == 0
    for bad in (-1, "launch", True, 1.5, "2026-11-26"):
        with pytest.raises(ConfigError) as err:
            parse_scenario({**data, "origin": bad}, "t.yaml")
        assert str(err.value) == f"t.yaml: origin: expected a Unix time in whole seconds (0 or later), got {bad!r}"


def test_write_with_origin_copies_the_scenario_with_its_origin(tmp_path):
    out = write_with_origin("scaling-ramp", 1_800_000_000, tmp_path / "scenario.origin.yaml")
    copy, original = load_scenario(out), load_scenario("scaling-ramp")
    assert copy.origin == 1_800_000_000 and original.origin == 0
    assert dataclasses.replace(copy, source="", origin=0) == dataclasses.replace(original, source="")
    again = write_with_origin(out, 7, tmp_path / "again.yaml")  # an origin already set is replaced
    assert load_scenario(again).origin == 7
    (tmp_path / "list.yaml").write_text("- not a mapping\n")
    with pytest.raises(ConfigError, match="list.yaml"):
        write_with_origin(tmp_path / "list.yaml", 7, tmp_path / "x.yaml")
