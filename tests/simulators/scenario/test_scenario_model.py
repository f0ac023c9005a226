"""The scenario engine: validation errors name file and key; the trace is what the scenario says."""

import json

import pytest

from ioparallax.simulators.scenario import BlockSizeMix, compile_scenario, list_scenarios, load_scenario, parse_scenario
from ioparallax.simulators.scenario.cli import main as scenario_cli
from ioparallax.yamlconf import ConfigError

MINIMAL = {
    "name": "t",
    "period": "60s",
    "cluster": {"cvms": ["cvm-1", "cvm-2"]},
    "vms": [{"name": "vm1", "disks": [{"streams": [{"read_iops": 100, "write_iops": 50}]}]}],
}


def with_stream(**kw):
    data = json.loads(json.dumps(MINIMAL))
    data["vms"][0]["disks"][0]["streams"][0].update(kw)
    return data


@pytest.mark.parametrize("name", list_scenarios())
def test_every_library_scenario_loads_and_compiles(name):
    sc = load_scenario(name)
    trace = compile_scenario(sc)
    assert sc.name == name
    assert sc.disks, "a scenario without disks shows nothing"
    # Something happens in every scenario at some point of the period.
    assert any(
        trace.second(d, t).read_ops + trace.second(d, t).write_ops > 0 for d in sc.disks for t in range(sc.period_s)
    )
    json.loads(trace.to_json())


def test_bursty_scenario_gives_the_vcenter_artifact_numbers():
    # 400 IO/s of 1 MiB for 1 s in every 20 s at 80 ms: the 20 s average is 20,480 KB/s at 80 ms.
    trace = compile_scenario(load_scenario("bursty-1m"))
    w = trace.window("burst-01/scsi0:1", end=20, seconds=20)
    assert w.rate("write_bytes") / 1024 == pytest.approx(20480)
    assert w.write_latency_s == pytest.approx(0.080)
    assert w.rate("write_ops") == pytest.approx(20)
    burst = trace.second("burst-01/scsi0:1", 0)
    assert burst.write_ops == 400
    # Little's law: 400 IO/s x 80 ms = 32 outstanding during the burst second.
    assert burst.write_outstanding_s == pytest.approx(32)
    assert trace.second("burst-01/scsi0:1", 1).write_ops == 0


def test_zero_heavy_shares_are_exact():
    trace = compile_scenario(load_scenario("zero-heavy"))
    w = trace.window("bench-01/scsi0:1", end=100, seconds=30)
    assert w.read_zero_ratio == pytest.approx(0.357)
    assert w.write_zero_ratio == pytest.approx(0.40)


def test_streams_add_and_latency_is_op_weighted():
    data = json.loads(json.dumps(MINIMAL))
    data["vms"][0]["disks"][0]["streams"] = [
        {"name": "a", "read_iops": 100, "write_iops": 0, "read_latency": "1ms"},
        {"name": "b", "read_iops": 300, "write_iops": 0, "read_latency": "5ms"},
    ]
    trace = compile_scenario(parse_scenario(data))
    s = trace.second("vm1/scsi0:1", 10)
    assert s.read_ops == 400
    assert s.read_latency_s == pytest.approx((100 * 0.001 + 300 * 0.005) / 400)


def test_vdisk_moves_between_cvms():
    data = json.loads(json.dumps(MINIMAL))
    data["vms"][0]["disks"][0].update({"cvm": "cvm-1", "moves": [{"at": "30s", "to": "cvm-2"}]})
    disk = parse_scenario(data).disks[0]
    assert disk.cvm_at(29) == "cvm-1"
    assert disk.cvm_at(30) == "cvm-2"


def test_window_wraps_around_the_period():
    data = with_stream(**{"from": "0s", "to": "10s"})
    trace = compile_scenario(parse_scenario(data))
    # seconds 55..59 are idle, 0..4 are active: a window ending at 5 sees 5 active seconds.
    assert trace.window("vm1/scsi0:1", end=5, seconds=10).read_ops == 5 * 100
    assert trace.now(wall=125.7) == 5


def test_block_size_mix_parses_bssplit():
    mix = BlockSizeMix.parse("4k/75:64k/25")
    assert mix.mean_bytes == pytest.approx(0.75 * 4096 + 0.25 * 65536)
    assert mix.fio_value == "4k/75:64k/25"
    assert BlockSizeMix.parse("1MiB").mean_bytes == 1024**2


@pytest.mark.parametrize(
    "mutate, key, words",
    [
        (
            lambda d: d["vms"][0]["disks"][0]["streams"][0].update(zero_reads=1.5),
            "vms[0].disks[0].streams[0].zero_reads",
            "between 0 and 1",
        ),
        (
            lambda d: d["vms"][0]["disks"][0]["streams"][0].update(read_iops="lots"),
            "vms[0].disks[0].streams[0].read_iops",
            "expected a number",
        ),
        (
            lambda d: d["vms"][0]["disks"][0]["streams"][0].update(read_size="4q"),
            "vms[0].disks[0].streams[0].read_size",
            "4KiB",
        ),
        (lambda d: d["vms"][0]["disks"][0].update(cvm="cvm-9"), "vms[0].disks[0].cvm", "unknown CVM"),
        (lambda d: d["vms"][0]["disks"][0].update(unit="floppy0"), "vms[0].disks[0].unit", "scsi0:1"),
        (
            lambda d: d["vms"][0]["disks"][0]["streams"][0].update(burst={"every": "20s", "length": "30s"}),
            "vms[0].disks[0].streams[0].burst.length",
            "length",
        ),
        (
            lambda d: d["vms"][0]["disks"][0]["streams"][0].update(zero_read=0.3),
            "vms[0].disks[0].streams[0].zero_read",
            "unknown key",
        ),
        (lambda d: d["cluster"].update(page_build=2019), "cluster.page_build", "2014"),
        (lambda d: d["cluster"].update(hypervisor="hyperv"), "cluster.hypervisor", "esxi, ahv"),
        (
            lambda d: (d["cluster"].update(hypervisor="ahv"), d["vms"][0]["disks"][0].update(unit="scsi0:1")),
            "vms[0].disks[0].unit",
            "disk_address",
        ),
        (lambda d: (d["cluster"].update(hypervisor="ahv"), d.update(period="20s")), "period", "Prism sample"),
        (lambda d: d.pop("cluster"), "cluster", "required"),
    ],
)
def test_errors_name_the_file_and_key(mutate, key, words):
    data = json.loads(json.dumps(MINIMAL))
    mutate(data)
    with pytest.raises(ConfigError) as err:
        parse_scenario(data, "my-scenario.yaml")
    assert err.value.path == "my-scenario.yaml"
    assert err.value.key == key
    assert words in str(err.value)
    assert str(err.value).startswith(f"my-scenario.yaml: {key}: ")


def test_cli_check_reports_the_file_and_key(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncluster: {cvms: [a]}\nvms:\n  - name: v\n    disks:\n      - streams: [{read_iops: -1}]\n")
    assert scenario_cli(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: vms[0].disks[0].streams[0].read_iops: must not be negative" in err


def test_cli_reports_yaml_syntax_errors_with_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert scenario_cli(["check", str(bad)]) == 2
    assert "invalid YAML (line" in capsys.readouterr().err


def test_cli_compile_writes_the_trace(tmp_path):
    out = tmp_path / "trace.json"
    assert scenario_cli(["compile", "bursty-1m", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    disk = data["vms"][0]["disks"][0]
    assert data["period_seconds"] == 600
    assert len(disk["write_bytes"]) == 600
    assert disk["write_bytes"][0] == 400 * 1024**2
    assert disk["write_latency_s"][0] == pytest.approx(0.08)
    assert disk["write_latency_s"][1] == 0


def test_ahv_cluster_names_disks_as_prism_and_nutanix_do():
    data = json.loads(json.dumps(MINIMAL))
    data["cluster"]["hypervisor"] = "ahv"
    data["vms"][0]["disks"].append({"unit": "scsi.4", "streams": [{"read_iops": 10}]})
    sc = parse_scenario(data, "ahv.yaml")
    first, second = sc.disks
    assert sc.cluster.ahv and sc.cluster.vm_view_source == "prism"
    assert (first.unit, second.unit) == ("scsi.1", "scsi.4")  # Prism's disk_address, default numbered as on ESXi
    assert sc.vms[0].host == "ahv-01"
    # vmdisk_uuid: a plain v4 UUID, not VMware's 6000c29 form; the disk file and the vdisk named after it
    assert not first.uuid.startswith("6000c29") and first.uuid != second.uuid
    assert first.backing_file == f"/ctr01/.acropolis/vmdisk/{first.uuid}"
    assert first.vdisk_name == f"NFS:1:0:{first.vdisk_id + 30000000}"


def test_esxi_is_the_default_and_keeps_its_names():
    sc = parse_scenario(json.loads(json.dumps(MINIMAL)), "esx.yaml")
    d = sc.disks[0]
    assert sc.cluster.hypervisor == "esxi" and sc.cluster.vm_view_source == "vcenter"
    assert (d.unit, sc.vms[0].host, d.uuid[:7], d.vdisk_name) == ("scsi0:1", "esx-01", "6000c29", "NFS:30001000")


def test_clean_oltp_ahv_is_clean_oltp_on_ahv():
    esx, ahv = load_scenario("clean-oltp"), load_scenario("clean-oltp-ahv")
    assert ahv.cluster.ahv and not esx.cluster.ahv
    assert [(d.vm, d.unit.replace("0:", ".")) for d in esx.disks] == [(d.vm, d.unit) for d in ahv.disks]
    assert [d.streams for d in esx.disks] == [d.streams for d in ahv.disks]
    assert ahv.expected_verdicts() == {
        (vm, unit.replace("0:", ".")): v for (vm, unit), v in esx.expected_verdicts().items()
    }
