"""Scenario fields of issue 23: guest_os (windows|linux), load_generator (fio|diskspd|vdbench),
the Windows volume of a disk and DiskSPD's options; errors name the file and the key."""

import json

import pytest

from ioparallax.simulators.scenario import compile_scenario, parse_scenario
from ioparallax.yamlconf import ConfigError

MINIMAL = {
    "name": "t",
    "period": "60s",
    "cluster": {"cvms": ["cvm-1"]},
    "vms": [{"name": "vm1", "disks": [{"streams": [{"read_iops": 100, "write_iops": 50}]}]}],
}


def scenario(**vm):
    data = json.loads(json.dumps(MINIMAL))
    data["vms"][0].update(vm)
    return data


def test_defaults_are_a_linux_guest_running_fio():
    vm = parse_scenario(scenario()).vms[0]
    assert (vm.guest_os, vm.load_generator, vm.hostname, vm.windows) == ("linux", "fio", "vm1", False)
    assert vm.disks[0].volume == "D:"


@pytest.mark.parametrize("text", ["Linux", "linux", "LINUX"])
def test_the_old_free_text_linux_still_loads(text):
    assert parse_scenario(scenario(guest_os=text)).vms[0].guest_os == "linux"


def test_a_windows_diskspd_vm_with_its_options():
    data = scenario(guest_os="Windows", load_generator="diskspd", hostname="SQL-01")
    data["vms"][0]["disks"] = [
        {"volume": "f:", "streams": [{"read_iops": 10, "diskspd": {"write_buffer": "zero", "run": "2m"}}]},
        {"streams": [{"read_iops": 10}]},
    ]
    vm = parse_scenario(data).vms[0]
    assert (vm.guest_os, vm.load_generator, vm.hostname) == ("windows", "diskspd", "SQL-01")
    assert [d.volume for d in vm.disks] == ["F:", "E:"]
    opts = vm.disks[0].streams[0].diskspd
    assert (opts.write_buffer, opts.run_seconds, opts.disable_os_cache, opts.threads) == ("zero", 120, True, 1)


def test_windows_volumes_default_by_position_and_reach_the_trace():
    data = scenario(guest_os="windows", load_generator="diskspd")
    data["vms"][0]["disks"] = [{"streams": [{"read_iops": 10}]}, {"streams": [{"read_iops": 10}]}]
    sc = parse_scenario(data)
    assert [d.volume for d in sc.vms[0].disks] == ["D:", "E:"]
    opts = sc.vms[0].disks[0].streams[0].diskspd
    assert opts is None  # the DiskSPD writer applies DiskspdOptions() defaults
    trace = json.loads(compile_scenario(sc).to_json())
    vm = trace["vms"][0]
    assert (vm["guest_os"], vm["hostname"], vm["load_generator"]) == ("windows", "vm1", "diskspd")
    assert [d["guest_disk_path"] for d in vm["disks"]] == ["D:\\", "E:\\"]


def test_linux_disks_report_no_guest_disk_path():
    trace = json.loads(compile_scenario(parse_scenario(scenario())).to_json())
    assert trace["vms"][0]["disks"][0]["guest_disk_path"] == ""


@pytest.mark.parametrize(
    "vm, key, words",
    [
        ({"guest_os": "Ubuntu 22.04"}, "vms[0].guest_os", "expected windows or linux, got 'Ubuntu 22.04'"),
        ({"load_generator": "iometer"}, "vms[0].load_generator", "expected one of fio, diskspd, vdbench"),
        ({"load_generator": "diskspd"}, "vms[0].load_generator", "diskspd on a linux guest is not simulated"),
        ({"guest_os": "windows"}, "vms[0].load_generator", "fio on a windows guest is not simulated"),
    ],
)
def test_vm_errors_name_the_file_and_key(vm, key, words):
    with pytest.raises(ConfigError) as err:
        parse_scenario(scenario(**vm), "s.yaml")
    assert (err.value.path, err.value.key) == ("s.yaml", key)
    assert words in str(err.value)


@pytest.mark.parametrize(
    "disk, vm, key, words",
    [
        ({"volume": "DD"}, {}, "vms[0].disks[0].volume", "drive letter such as D:"),
        (
            {"streams": [{"read_iops": 1, "diskspd": {"write_buffer": "ones"}}]},
            {"guest_os": "windows", "load_generator": "diskspd"},
            "vms[0].disks[0].streams[0].diskspd.write_buffer",
            "sequential, zero, random",
        ),
        (
            {"streams": [{"read_iops": 1, "diskspd": {"run": "2s"}}]},
            {"guest_os": "windows", "load_generator": "diskspd"},
            "vms[0].disks[0].streams[0].diskspd.run",
            "at least 5 s",
        ),
        (
            {"streams": [{"read_iops": 1, "diskspd": {"threds": 2}}]},
            {"guest_os": "windows", "load_generator": "diskspd"},
            "vms[0].disks[0].streams[0].diskspd.threds",
            "unknown key",
        ),
        (
            {"streams": [{"read_iops": 1, "diskspd": {}}]},
            {},
            "vms[0].disks[0].streams[0].diskspd",
            "load_generator is fio",
        ),
    ],
)
def test_disk_errors_name_the_file_and_key(disk, vm, key, words):
    data = scenario(**vm)
    data["vms"][0]["disks"][0].update(disk)
    with pytest.raises(ConfigError) as err:
        parse_scenario(data, "s.yaml")
    assert (err.value.path, err.value.key) == ("s.yaml", key)
    assert words in str(err.value)


def test_two_windows_disks_on_one_volume_are_an_error():
    data = scenario(guest_os="windows", load_generator="diskspd")
    data["vms"][0]["disks"] = [
        {"volume": "D:", "streams": [{"read_iops": 1}]},
        {"volume": "d:", "streams": [{"read_iops": 1}]},
    ]
    with pytest.raises(ConfigError, match=r"s.yaml: vms\[0\].disks: two disks share a volume"):
        parse_scenario(data, "s.yaml")
