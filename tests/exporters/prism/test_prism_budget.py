"""The series budget of docs/prism.md, counted from real expositions of the simulator: series
per VM disk by family group and collector switch, per VM, per probe. The table in the docs is
parsed and must match what is counted, so the docs cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import FROZEN, config_yaml

DOCS = Path(__file__).resolve().parents[3] / "docs" / "prism.md"
PER_VM = {"prism_vm_info", "prism_vm_cpu_usage_ratio", "prism_vm_cpu_ready_ratio", "prism_vm_vcpus"}
#: Per host (one CVM each): its CPU families and its CVM's prism_vm_cvm_info.
PER_HOST = {"prism_host_cpu_capacity_hertz", "prism_host_cpu_cores", "prism_host_cpu_usage_ratio", "prism_vm_cvm_info"}


def _count(text: str, disks: int, vms: int, hosts: int = 1) -> tuple[dict[str, float], int, int, int]:
    per_family: dict[str, int] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            per_family[name] = per_family.get(name, 0) + 1
    per_disk = {n: c / disks for n, c in per_family.items() if n.startswith("prism_virtual_disk")}
    per_vm = sum(c for n, c in per_family.items() if n in PER_VM) // vms
    per_host = sum(c for n, c in per_family.items() if n in PER_HOST) // hosts
    per_probe = sum(
        c for n, c in per_family.items() if not n.startswith("prism_virtual_disk") and n not in PER_VM | PER_HOST
    )
    return per_disk, per_vm, per_host, per_probe


def _docs_budget() -> dict[str, int]:
    """{row label: series per disk} of the budget table in docs/prism.md."""
    text = DOCS.read_text()
    table = next(b for b in text.split("### Series budget", 1)[1].split("\n\n") if b.startswith("| family"))
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("*")] = int(re.sub(r"\D.*", "", cells[1].strip("*")))
    return rows


@pytest.mark.parametrize(
    "flags, total_row",
    [
        ({}, "total"),
        ({"latest_samples": False}, "without latest samples"),
        ({"latest_samples": False, "controller": False}, "without latest samples and controller"),
    ],
)
def test_series_per_disk_match_the_docs(prism_sim, exporter, flags, total_row):
    sim = prism_sim("noisy-neighbour", clock=lambda: FROZEN)
    exp = exporter(config_yaml([sim.address]), **flags)
    code, text = exp.probe_text(sim.address)
    assert code == 200
    # The VMs are the scenario's and the CVMs (one per host, listed among the VMs by Prism).
    vms = len(sim.scenario.vms) + len(sim.model.cvms)
    per_disk, per_vm, per_host, per_probe = _count(text, len(sim.scenario.disks), vms, len(sim.model.cvms))
    assert all(v == 1 for v in per_disk.values()), per_disk  # each family: one series per disk
    budget = _docs_budget()
    assert sum(per_disk.values()) == budget[total_row]
    groups = {
        "VM-view counters: ops, bytes, latency, read and write; samples": [
            n
            for n in per_disk
            if re.fullmatch(r"prism_virtual_disk_(read|write)_\w+_total|prism_virtual_disk_samples_total", n)
        ],
        "storage-view counters (`--no-collector.controller`)": [n for n in per_disk if "_controller_" in n],
        "sample timestamp, interval, age": [
            n for n in per_disk if n.endswith(("_timestamp_seconds", "_interval_seconds", "_age_seconds"))
        ],
        "`prism_virtual_disk_info`, `_capacity_bytes`": [
            n for n in per_disk if n.endswith(("_info", "_capacity_bytes"))
        ],
        "latest-sample gauges (`--no-collector.latest-samples`)": [
            n for n in per_disk if re.fullmatch(r"prism_virtual_disk_sample_(read|write)_\w+", n)
        ],
    }
    for row, names in groups.items():
        if names or not flags:
            assert len(names) == budget[row], (row, names)
    assert per_vm == budget["`prism_vm_info`, CPU (per VM, CVMs included)"]
    assert per_host == budget["CPU, `prism_vm_cvm_info` (per host)"]
    assert per_probe == budget["per probe (per Prism)"]


@pytest.mark.parametrize("fault", [None, "http_500"])
def test_expositions_pass_promtool(prism_sim, exporter, fault):
    """promtool check metrics: the format and Prometheus' naming lint (counters end in _total,
    base units), on a full probe and on a failed one."""
    from tests.support import promtool_check_metrics

    sim = prism_sim("noisy-neighbour", clock=lambda: FROZEN)
    if fault:
        sim.set_fault(fault)
    exp = exporter(config_yaml([sim.address]))
    code, text = exp.probe_text(sim.address)
    assert code == 200
    result = promtool_check_metrics(text)
    assert result.returncode == 0, (result.stdout.decode(), result.stderr.decode())
