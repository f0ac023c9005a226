"""CPU in the scenario's ground truth: per VM (following its I/O), per CVM (its share of the host)
and per host; defaults that leave every existing scenario's I/O as it was; errors naming the key."""

import json

import pytest

from ioparallax.simulators.scenario import compile_scenario, parse_scenario
from ioparallax.yamlconf import ConfigError

BASE = {
    "name": "t",
    "period": "60s",
    "cluster": {"cvms": ["cvm-1", "cvm-2"]},
    "vms": [
        {"name": "vm1", "disks": [{"streams": [{"read_iops": 1000, "write_iops": 500, "from": "0s", "to": "30s"}]}]},
        {"name": "vm2", "disks": [{"streams": [{"read_iops": 100}]}]},
    ],
}


def scenario(**changes):
    data = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        if key == "cluster_cpu":
            data["cluster"]["cpu"] = value
        elif key == "vm_cpu":
            data["vms"][0]["cpu"] = value
    return parse_scenario(data, "t.yaml")


def test_defaults_give_one_host_per_cvm_with_a_cvm_at_five_percent():
    trace = compile_scenario(scenario())
    assert [(h.name, h.cvm, h.cvm_vm) for h in trace.hosts] == [
        ("esx-01", "cvm-1", "NTNX-SIMBLK01-A-CVM"),
        ("esx-02", "cvm-2", "NTNX-SIMBLK01-B-CVM"),
    ]
    capacity = 2600 * 24
    assert trace.cvm_cpu["esx-01"].usage_mhz == [pytest.approx(0.05 * capacity)] * 60


def test_a_vms_cpu_follows_its_io():
    trace = compile_scenario(scenario())
    vm1 = trace.vm_cpu["vm1"].usage_mhz
    # 20 MHz idle + 50,000 cycles per I/O x 1,500 IO/s = 95 MHz while the stream runs, 20 after.
    assert vm1[0] == pytest.approx(20 + 50_000 * 1500 / 1e6)
    assert vm1[45] == pytest.approx(20)
    # vm1 on esx-01 (round robin), vm2 on esx-02: each host is its CVM plus its VMs.
    host = trace.host_cpu["esx-01"].usage_mhz
    assert host[0] == pytest.approx(0.05 * 2600 * 24 + vm1[0])
    used, ready = trace.host_cpu["esx-01"].window(30, 30)
    assert used == pytest.approx(sum(host[:30]))
    assert ready > 0


def test_a_cpu_bound_vm_is_capped_at_its_vcpus_and_a_full_host_shares_what_the_cvm_leaves():
    trace = compile_scenario(scenario(vm_cpu={"vcpus": 4, "cycles_per_io": 10_000_000}))
    assert max(trace.vm_cpu["vm1"].usage_mhz) == pytest.approx(4 * 2600)
    small = compile_scenario(
        scenario(
            cluster_cpu={"cores": 2, "core_mhz": 1000, "cvm_share": 0.25}, vm_cpu={"vcpus": 4, "cycles_per_io": 1e7}
        )
    )
    # 2,000 MHz host, CVM 500: vm1 gets the 1,500 left, and its ready time grows with the load.
    assert small.vm_cpu["vm1"].usage_mhz[0] == pytest.approx(1500)
    assert small.host_cpu["esx-01"].usage_mhz[0] == pytest.approx(2000)
    assert small.vm_cpu["vm1"].ready_s[0] > trace.vm_cpu["vm1"].ready_s[0]


def test_the_trace_json_carries_hosts_cvms_and_vm_cpu():
    data = json.loads(compile_scenario(scenario(cluster_cpu={"core_mhz": 2000, "cores": 16})).to_json())
    host = data["hosts"][0]
    assert (host["name"], host["cpu_mhz"], host["cores"]) == ("esx-01", 2000, 16)
    assert host["cvm"]["name"] == "NTNX-SIMBLK01-A-CVM"
    assert host["cvm"]["cpu"]["usage_mhz"][0] == pytest.approx(0.05 * 2000 * 16)
    assert len(data["vms"][0]["cpu"]["usage_mhz"]) == 60
    assert data["vms"][0]["cpu"]["vcpus"] == 2


def test_a_host_a_vm_names_beyond_the_cvms_has_no_cvm():
    data = json.loads(json.dumps(BASE))
    data["vms"][1]["host"] = "esx-09"
    trace = compile_scenario(parse_scenario(data, "t.yaml"))
    assert trace.hosts[-1].name == "esx-09" and trace.hosts[-1].cvm == ""
    assert "esx-09" not in trace.cvm_cpu
    assert trace.host_cpu["esx-09"].usage_mhz[0] == pytest.approx(trace.vm_cpu["vm2"].usage_mhz[0])


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"cluster_cpu": {"cores": 0}}, "cluster.cpu.cores"),
        ({"cluster_cpu": {"cvm_share": 1.5}}, "cluster.cpu.cvm_share"),
        ({"cluster_cpu": {"cvm_shar": 0.1}}, "cluster.cpu"),
        ({"cluster_cpu": {"block_serial": "a b"}}, "cluster.cpu.block_serial"),
        ({"vm_cpu": {"vcpus": 0}}, "vms[0].cpu.vcpus"),
        ({"vm_cpu": {"cycles_per_io": -1}}, "vms[0].cpu.cycles_per_io"),
        ({"vm_cpu": 4}, "vms[0].cpu"),
    ],
)
def test_cpu_errors_name_the_file_and_the_key(change, key):
    with pytest.raises(ConfigError) as err:
        scenario(**change)
    assert err.value.path == "t.yaml"
    assert err.value.key.startswith(key)


def test_db_density_is_near_linear_cpu_bound_with_cvms_at_five_percent():
    from ioparallax.simulators.scenario import load_scenario

    trace = compile_scenario(load_scenario("db-density"))
    step = 120
    totals = []
    for n in range(1, 9):
        t = (n - 1) * step + 30
        totals.append(sum(trace.second(d, t).read_ops + trace.second(d, t).write_ops for d in trace.disks))
        running = [vm.name for vm in trace.scenario.vms[:n]]
        assert all(trace.vm_cpu[v].usage_mhz[t] == pytest.approx(4 * 2600) for v in running), "CPU-bound"
    assert totals[0] == pytest.approx(2000)
    assert totals[-1] / (8 * 2000) == pytest.approx(0.90, abs=0.001), "90 % of the theoretical maximum"
    assert all(b > a for a, b in zip(totals, totals[1:])), "every VM adds throughput"
    assert [h.name for h in trace.hosts] == ["esx-01", "esx-02", "esx-03", "esx-04"]
    for h in trace.hosts:
        assert trace.cvm_cpu[h.name].usage_mhz[0] / (2600 * 24) == pytest.approx(
            trace.scenario.expect["cpu"]["cvm_host_share"]
        )
