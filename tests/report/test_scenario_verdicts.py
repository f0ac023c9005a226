"""The scenarios' `expect.verdicts`: validated when a scenario loads (a typo in a trap, a state or a
VM disk names the key), and expanded to every trap of every VM disk (unlisted: OK)."""

from __future__ import annotations

import copy

import pytest
import yaml

from ioparallax.report.verdicts import TRAPS
from ioparallax.simulators.scenario import list_scenarios, load_scenario
from ioparallax.simulators.scenario.model import SCENARIO_DIR, parse_scenario
from ioparallax.yamlconf import ConfigError


def raw(name: str) -> dict:
    return yaml.safe_load((SCENARIO_DIR / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", list_scenarios())
def test_every_library_scenario_states_its_verdicts(name):
    sc = load_scenario(name)
    assert "verdicts" in sc.expect, f"{name}: expect.verdicts missing"
    got = sc.expected_verdicts()
    assert set(got) == {(vm.name, d.unit) for vm in sc.vms for d in vm.disks}
    for row in got.values():
        assert list(row) == list(TRAPS)


def test_unlisted_traps_are_ok_and_per_disk_entries_override():
    data = raw("clean-oltp")
    data["expect"]["verdicts"] = {
        "hygiene": "Distorted",
        "disks": {"oltp-02 scsi0:1": {"hygiene": "OK", "bursts": "Not measurable"}},
    }
    got = parse_scenario(data, "x.yaml").expected_verdicts()
    assert got[("oltp-01", "scsi0:1")] == {**dict.fromkeys(TRAPS, "OK"), "hygiene": "Distorted"}
    assert got[("oltp-02", "scsi0:1")] == {**dict.fromkeys(TRAPS, "OK"), "bursts": "Not measurable"}


@pytest.mark.parametrize(
    "verdicts,key,message",
    [
        ({"zero_write": "Distorted"}, "expect.verdicts.zero_write", "unknown trap"),
        ({"zero_writes": "distorted"}, "expect.verdicts.zero_writes", "expected one of OK, Distorted, Not measurable"),
        ({"disks": {"nope scsi0:1": {"bursts": "OK"}}}, "expect.verdicts.disks.nope scsi0:1", "no such VM disk"),
        ({"disks": {"oltp-01 scsi0:1": {"bursts": "Fine"}}}, "bursts", "expected one of"),
    ],
)
def test_bad_verdicts_name_the_key(verdicts, key, message):
    data = copy.deepcopy(raw("clean-oltp"))
    data["expect"]["verdicts"] = verdicts
    with pytest.raises(ConfigError) as e:
        parse_scenario(data, "x.yaml")
    assert key in str(e.value) and message in str(e.value)
