"""guest.hostName and guest.disk (VMware Tools' guest volumes and the virtual disks behind them):
the scenario simulator fills them from the trace, both inventory paths read them alike, and the
exporter exposes vcenter_vm_guest_disk_info for the Windows guest-to-VM join."""

from __future__ import annotations

import pytest

from ioparallax.exporters.vcenter.inventory import collect_inventory, collect_inventory_soap
from ioparallax.exporters.vcenter.parse import guest_disks_from_xml
from tests.simulators.vcenter.test_vcenter_simulator import FROZEN
from tests.support import scenario_trace

from .conftest import insecure_config
from .test_vcenter_exporter import ENV

SCENARIO = {
    "name": "guests",
    "period": "60s",
    "cluster": {"cvms": ["cvm-1", "cvm-2"]},
    "vms": [
        {
            "name": "sql-01",
            "guest_os": "windows",
            "load_generator": "diskspd",
            "hostname": "SQL-01",
            "disks": [
                {"unit": "scsi0:1", "streams": [{"read_iops": 10}]},
                {"unit": "scsi1:0", "volume": "L:", "streams": [{"write_iops": 10}]},
            ],
        },
        {"name": "pg-01", "disks": [{"streams": [{"read_iops": 10}]}]},
    ],
}


@pytest.fixture(scope="module")
def guests_trace(tmp_path_factory):
    trace = scenario_trace(SCENARIO)
    path = tmp_path_factory.mktemp("trace") / "guests.json"
    path.write_text(trace.to_json())
    return path, trace


def test_simulator_fills_hostname_and_guest_disk_and_both_inventory_paths_agree(scenario_sim, guests_trace, connect):  # noqa: F811
    path, _ = guests_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    si = connect(address)
    sync = {vm.name: vm for vm in collect_inventory(si)}
    soap = {vm.name: vm for vm in collect_inventory_soap(si)}
    assert sync == soap
    sql, pg = sync["sql-01"], sync["pg-01"]
    assert sql.hostname == "SQL-01" and pg.hostname == "pg-01"
    assert sorted(sql.guest_disk_rows()) == [("scsi0:1", "D:\\"), ("scsi1:0", "L:\\")]
    # the mapping goes through the device key, not the order: each key is its disk's
    keys = {d.instance: d.key for d in sql.disks}
    assert {g.disk_path: g.keys for g in sql.guest_disks} == {"D:\\": (keys["scsi0:1"],), "L:\\": (keys["scsi1:0"],)}
    assert pg.guest_disks == ()  # the Linux guests use raw devices: no volume to report


def test_exporter_exposes_guest_disk_info(scenario_sim, guests_trace, exporter):
    path, _ = guests_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    m = exporter(insecure_config(), ENV).probe(address)
    rows = {dict(k)["disk"]: dict(k) for k in m["vcenter_vm_guest_disk_info"]}
    assert set(rows) == {"scsi0:1", "scsi1:0"}
    assert rows["scsi1:0"] == {
        "vm": "sql-01",
        "vm_id": rows["scsi1:0"]["vm_id"],
        "disk": "scsi1:0",
        "disk_path": "L:\\",
        "hostname": "SQL-01",
    }
    assert rows["scsi1:0"]["vm_id"].startswith("vm-")
    assert set(m["vcenter_vm_guest_disk_info"].values()) == {1}


def test_guest_disk_xml_keeps_what_it_can_read():
    from lxml import etree

    val = etree.fromstring(
        b'<val xmlns="urn:vim25" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        b'xsi:type="ArrayOfGuestDiskInfo">'
        b"<GuestDiskInfo><diskPath>C:\\</diskPath><capacity>1</capacity><mappings><key>2000</key></mappings>"
        b"<mappings><key>2001</key></mappings></GuestDiskInfo>"
        b"<GuestDiskInfo><diskPath>/data</diskPath><mappings><key>x</key></mappings></GuestDiskInfo>"
        b"<GuestDiskInfo><diskPath>E:\\</diskPath></GuestDiskInfo></val>"
    )
    disks = guest_disks_from_xml(val)
    assert [(g.disk_path, g.keys) for g in disks] == [("C:\\", (2000, 2001)), ("/data", ()), ("E:\\", ())]
    assert guest_disks_from_xml(None) == ()
