"""``ioparallax-demo --from-start`` (Stack(from_start=True)): every simulator of every cluster reads one
copy of its scenario whose origin is the stack's start, without starting anything (no ``e2e`` marker);
tests/e2e/test_e2e_scaling.py runs scaling-ramp that way."""

from __future__ import annotations

import json
import time

import pytest

from ioparallax.simulators.scenario import load_scenario
from ioparallax.simulators.stack import Stack, core
from ioparallax.simulators.stack.cli import main


def test_every_cluster_gets_one_scenario_file_with_the_origin(tmp_path):
    stack = Stack(scenarios=["scaling-ramp,zero-heavy@poc-b"], workdir=tmp_path, cluster_label="cluster")
    stack.origin = 1_800_000_020
    parts = stack._cluster_parts()
    for part, name in zip(parts, ("scaling-ramp", "zero-heavy")):
        assert part.scenario == str(part.workdir / "scenario.origin.yaml")  # what the simulators are given
        copy = load_scenario(part.scenario)
        assert copy.name == name and copy.origin == part.trace.origin == 1_800_000_020
        assert copy.vms == load_scenario(name).vms
        assert json.loads(part.trace.to_json())["origin_seconds"] == 1_800_000_020  # the Go simulator's
    assert parts[0].workdir != parts[1].workdir


def test_without_from_start_the_library_file_and_its_origin_are_used(tmp_path):
    stack = Stack(scenario="scaling-ramp", workdir=tmp_path, cluster_label="cluster")
    (part,) = stack._cluster_parts()
    assert part.scenario.endswith("scenarios/scaling-ramp.yaml")
    assert part.trace.origin == 0
    assert not (tmp_path / "scenario.origin.yaml").exists()


def test_the_origin_is_the_start(tmp_path, monkeypatch):
    stack = Stack(scenario="scaling-ramp", workdir=tmp_path, cluster_label="cluster", from_start=True)
    for name in ("start_stargate", "start_vcenter", "start_guests", "start_node_exporter"):
        monkeypatch.setattr(core, name, lambda *a: [])
    for name in ("start_alertmanager", "start_prometheus"):
        monkeypatch.setattr(core, name, lambda *a: None)
    before = int(time.time())
    stack.start()
    assert stack.origin is not None
    assert before <= stack.origin <= time.time()
    assert stack.trace.origin == stack.origin
    assert stack.trace.period_second(stack.origin + 119) == 119  # the ramp's first VM, from the origin
    # No simulator runs before the origin: every view starts at period second 0, never at the
    # previous period's end.
    assert stack.trace.period_second(time.time()) < 60


def test_from_start_is_a_demo_flag(capsys):
    with pytest.raises(SystemExit) as exc:  # refused before anything starts
        main(["--from-start", "--scenario", "no-such-scenario"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no scenario named 'no-such-scenario'" in err and "unrecognized" not in err
