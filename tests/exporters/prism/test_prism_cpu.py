"""CPU through the Prism exporter: the VMs', CVMs' and hosts' latest 30 s sample against the
scenario's CPU truth, the CVMs by is_cvm, capacity; cpu off reads no stats; parse of the keys."""

from __future__ import annotations

import pytest

from ioparallax.exporters.prism import parse
from tests.support import metric_value as value

from .conftest import FROZEN, config_yaml


def test_cpu_of_vms_cvms_and_hosts_match_the_truth(prism_sim, exporter):
    sim = prism_sim("clean-oltp-ahv", clock=lambda: FROZEN)
    m = exporter(config_yaml([sim.address])).probe(sim.address)
    assert value(m, "prism_up") == 1
    trace, model = sim.trace, sim.model
    end = model.sample_end(FROZEN)
    cc = sim.scenario.cluster.cpu
    cvms = {dict(k)["vm"]: dict(k)["host"] for k in m["prism_vm_cvm_info"]}
    assert cvms == {h.cvm_vm: h.name for h in trace.hosts if h.cvm}
    for h in trace.hosts:
        used, ready = trace.cvm_cpu[h.name].window(trace.period_second(end), 30)
        usage = value(m, "prism_vm_cpu_usage_ratio", vm=h.cvm_vm)
        assert usage == pytest.approx(used / 30 / (cc.cvm_vcpus * cc.core_mhz), abs=1e-6)
        assert value(m, "prism_vm_cpu_ready_ratio", vm=h.cvm_vm) == pytest.approx(ready / 30 / cc.cvm_vcpus, abs=1e-6)
        assert value(m, "prism_host_cpu_capacity_hertz", host=h.name) == cc.core_mhz * cc.cores * 1e6
        cores = value(m, "prism_host_cpu_cores", host=h.name)
        # The CVM's share of its host, as the recording rule computes it: usage x vCPUs / cores.
        assert usage * value(m, "prism_vm_vcpus", vm=h.cvm_vm) / cores == pytest.approx(cc.cvm_share, abs=1e-5)
        host_used, _ = trace.host_cpu[h.name].window(trace.period_second(end), 30)
        assert value(m, "prism_host_cpu_usage_ratio", host=h.name) == pytest.approx(
            host_used / 30 / cc.host_capacity_mhz, abs=1e-6
        )
    vm = sim.scenario.vms[0]
    used, _ = trace.vm_cpu[vm.name].window(trace.period_second(end), 30)
    assert value(m, "prism_vm_cpu_usage_ratio", vm=vm.name) == pytest.approx(
        used / 30 / (vm.cpu.vcpus * cc.core_mhz), abs=1e-6
    )


def test_cpu_off_reads_the_vm_list_only_when_due(prism_sim, exporter):
    sim = prism_sim("clean-oltp-ahv", clock=lambda: FROZEN)
    exp = exporter(config_yaml([sim.address], cpu="false"))
    exp.probe(sim.address)
    m = exp.probe(sim.address)
    assert value(m, "prism_up") == 1
    assert value(m, "prism_v2_requests") == 1, "virtual_disks only: the VM list is cached"


def test_parse_reads_cvm_flags_and_ppm_and_leaves_absent_values_out():
    ents = [
        {
            "uuid": "A",
            "name": "NTNX-1-A-CVM",
            "controller_vm": True,
            "num_vcpus": 8,
            "stats": {"hypervisor_cpu_usage_ppm": "406250"},
        },
        {
            "uuid": "b",
            "name": "pg",
            "is_cvm": False,
            "stats": {"hypervisor_cpu_usage_ppm": "-1", "hypervisor.cpu_ready_time_ppm": "2000"},
        },
        {"uuid": "c", "name": "old", "controllerVm": True},
    ]
    cvm, pg, old = parse.vms(ents)
    assert (cvm.is_cvm, cvm.vcpus, cvm.cpu_usage, cvm.uuid) == (True, 8, 0.40625, "a")
    assert (pg.is_cvm, pg.cpu_usage, pg.cpu_ready) == (False, None, 0.002)
    assert old.is_cvm and old.cpu_usage is None
    (host,) = parse.host_records(
        [{"uuid": "H", "name": "ahv-01", "num_cpu_cores": 24, "cpu_capacity_in_hz": 62400000000}]
    )
    assert (host.uuid, host.cores, host.capacity_hz, host.cpu_usage) == ("h", 24, 62.4e9, None)
