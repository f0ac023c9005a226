"""CPU of the VMs, the CVMs and their hosts through the exporter: the integrated counters against
the scenario's CPU truth, the CVMs recognised, host capacity; a vCenter without the CPU counters
still gives every disk metric; config errors name the file and the key."""

from __future__ import annotations

import copy

import pytest

from ioparallax.exporters.vcenter.capture import capture, replay
from ioparallax.exporters.vcenter.config import TargetConfig, load_config
from ioparallax.exporters.vcenter.parse import is_cvm
from ioparallax.yamlconf import ConfigError
from tests.simulators.vcenter.test_vcenter_simulator import FROZEN, T0
from tests.support import metric_value as value, parse_metrics

from .conftest import PASSWORD, USER, insecure_config
from .test_vcenter_exporter import frozen_and_probed

ENV = {"VC_TEST_PASSWORD": PASSWORD}


def _truth(series, trace, end):
    """The cycles and ready seconds of the 20 s sample ending at ``end``, as vCenter rounds them."""
    used, ready = series.window(end % trace.period, 20)
    return round(used / 20) * 1e6 * 20, round(ready * 1000) / 1000


def test_cpu_counters_match_the_scenario_truth(scenario_sim, postgres_trace, exporter):
    path, trace = postgres_trace
    address, exp, first = frozen_and_probed(scenario_sim, exporter, path)
    # The first probe integrates the newest sample; after a gap of ten samples, all ten.
    target = exp.targets.get(address)
    for state in target.cpu_states.values():
        state.last_timestamp = T0 - 200
    m = exp.probe(address)
    cvms = {h.cvm_vm: h for h in trace.hosts if h.cvm}
    got = {dict(k)["vm"]: dict(k)["host"] for k in m["vcenter_vm_cvm_info"]}
    assert got == {name: h.name for name, h in cvms.items()}, "every CVM, on its host"

    for vm, series in [("pg-01", trace.vm_cpu["pg-01"])] + [(n, trace.cvm_cpu[h.name]) for n, h in cvms.items()]:
        want = [_truth(series, trace, end) for end in range(T0 - 180, T0 + 1, 20)]
        cycles = value(m, "vcenter_vm_cpu_usage_cycles_total", vm=vm) - value(
            first, "vcenter_vm_cpu_usage_cycles_total", vm=vm
        )
        ready = value(m, "vcenter_vm_cpu_ready_seconds_total", vm=vm) - value(
            first, "vcenter_vm_cpu_ready_seconds_total", vm=vm
        )
        assert cycles == pytest.approx(sum(c for c, _ in want), abs=10 * 20e6), vm  # 1 MHz rounding a sample
        assert ready == pytest.approx(sum(r for _, r in want), abs=0.011), vm
        assert value(m, "vcenter_vm_cpu_samples_total", vm=vm) == 11
    for h in trace.hosts:
        assert value(m, "vcenter_host_cpu_capacity_hertz", host=h.name) == 2600e6 * 24
        assert value(m, "vcenter_host_cpu_cores", host=h.name) == 24
        want = [_truth(trace.host_cpu[h.name], trace, end) for end in range(T0 - 180, T0 + 1, 20)]
        cycles = value(m, "vcenter_host_cpu_usage_cycles_total", host=h.name) - value(
            first, "vcenter_host_cpu_usage_cycles_total", host=h.name
        )
        assert cycles == pytest.approx(sum(c for c, _ in want), abs=10 * 20e6), h.name
    # The CVM's share of its host, what the recording rules compute: 5 % of the capacity.
    cvm, host = next(iter(cvms.items()))
    share = (
        value(m, "vcenter_vm_cpu_usage_cycles_total", vm=cvm)
        - value(first, "vcenter_vm_cpu_usage_cycles_total", vm=cvm)
    ) / (200 * value(m, "vcenter_host_cpu_capacity_hertz", host=host.name))
    assert share == pytest.approx(0.05, abs=0.001)
    assert value(m, "vcenter_perf_cpu_queries") >= 1 and value(m, "vcenter_cpu_query_failed") == 0


def test_a_vcenter_without_the_cpu_counters_still_gives_the_disks(scenario_sim, postgres_trace):
    """A capture replayed as if vCenter offered no cpu.* counter: no CPU query, no CPU family,
    every disk series as before."""
    path, _ = postgres_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    raw, live = capture(address, TargetConfig(username=USER, password=PASSWORD, insecure_skip_verify=True))
    no_cpu = copy.deepcopy(raw)
    no_cpu.manifest["counters"] = {k: n for k, n in raw.manifest["counters"].items() if not n.startswith("cpu.")}
    full = parse_metrics(live.decode())
    m = parse_metrics(replay(no_cpu).decode())
    assert value(m, "vcenter_up") == 1
    assert "vcenter_vm_cpu_usage_cycles_total" in full and "vcenter_vm_cpu_usage_cycles_total" not in m
    assert "vcenter_perf_cpu_queries" not in m
    for name, series in full.items():
        if name.startswith("vcenter_virtual_disk_"):
            assert m[name] == series, name
    assert m["vcenter_vm_cvm_info"] == full["vcenter_vm_cvm_info"], "CVMs are known from the inventory alone"


def test_cpu_off_asks_for_no_cpu(scenario_sim, postgres_trace, exporter):
    path, _ = postgres_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    m = exporter(insecure_config(cpu="false"), ENV).probe(address)
    assert value(m, "vcenter_up") == 1 and "vcenter_vm_cpu_usage_cycles_total" not in m
    assert m["vcenter_virtual_disk_read_ops_total"]


def test_a_cvm_is_recognised_by_name_or_by_its_servicevm_folder():
    import re

    pattern = re.compile(r"^NTNX-.*-CVM$")
    assert is_cvm("NTNX-16SM6B490001-A-CVM", "[ds] NTNX-16SM6B490001-A-CVM/x.vmx", pattern) == "name"
    assert is_cvm("cvm-renamed", "[NTNX-local-ds-1] ServiceVM_Centos/ServiceVM_Centos.vmx", pattern) == "vmx_path"
    assert is_cvm("pg-01", "[ctr01] pg-01/pg-01.vmx", pattern) == ""


def test_cvm_pattern_errors_name_the_file_and_the_key(tmp_path):
    path = tmp_path / "vc.yml"
    path.write_text("allow_unlisted_targets: true\ndefaults:\n  cvm_name_pattern: 'NTNX-(['\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(path), env={})
    assert str(path) in str(err.value) and "defaults.cvm_name_pattern" in str(err.value)
    path.write_text("allow_unlisted_targets: true\ndefaults:\n  cvm_name_pattern: '^CVM-'\n  cpu: false\n")
    cfg = load_config(str(path), env={})
    assert cfg.defaults.cvm_name_pattern.pattern == "^CVM-" and cfg.defaults.cpu is False
