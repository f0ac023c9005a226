"""The inventory kept current through the PropertyCollector's WaitForUpdatesEx (issue 24), against
the real simulators: the watch's full read equals the paged RetrievePropertiesEx read; a VM renamed,
a disk added, a VM destroyed or cloned in vCenter shows up in the next probes without the
inventory being read whole again (one CreatePropertyCollector/CreateFilter in the whole test, no
RetrievePropertiesEx); a collector lost on the server is logged with the target and the cause and
answered by a full read; malformed update answers are clear protocol errors."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest
from pyVim.connect import Disconnect
from pyVmomi import vim

from ioparallax.exporters.vcenter import client
from ioparallax.exporters.vcenter.client import TargetError, destroy_collector_body
from ioparallax.exporters.vcenter.inventory import collect_inventory_soap
from ioparallax.exporters.vcenter.inventory_watch import InventoryState, InventoryWatch
from ioparallax.exporters.vcenter.parse import parse_update_set
from tests.simulators.vcenter.test_vcenter_simulator import FROZEN

from .conftest import PASSWORD, insecure_config
from .test_vcenter_faults import Admin, WaitForTask, probe_until
from .test_vcenter_inventory import simulator_session

ENV = {"VC_TEST_PASSWORD": PASSWORD}
LOGGER = "ioparallax.exporters.vcenter"


@pytest.fixture
def soap_calls():
    """Every plain-SOAP request the exporter makes, counted by method (the capture's hook)."""
    calls: Counter = Counter()
    client.RECORDER = lambda method, request, status, answer, seconds: calls.update([method])
    yield calls
    client.RECORDER = None


@pytest.mark.parametrize("simulator", ["scenario", "stock"])
def test_the_watchs_full_read_equals_the_paged_read(simulator, scenario_sim, postgres_trace, stock_vcsim):
    """The first WaitForUpdatesEx (every object as enter, paged by the simulator at 100 objects)
    gives the same VMs, disks, hosts and datastores as RetrievePropertiesEx; the next one finds
    nothing changed."""
    address, si = simulator_session(simulator, scenario_sim, postgres_trace, stock_vcsim, vms=150)
    try:
        watch = InventoryWatch(address)
        first = watch.read(si)
        assert first.full and first.how == "WaitForUpdatesEx"
        assert first.inventory == collect_inventory_soap(si)
        assert first.counts.entered == len(first.inventory) + len(watch.state.hosts) + len(watch.state.datastores)
        again = watch.read(si)
        assert not again.full and again.inventory is None and again.counts.total == 0
    finally:
        Disconnect(si)
    if simulator == "scenario":
        assert len(first.inventory) > 150  # more than one page of 100 object updates


def _vm_info(m: dict) -> dict[str, str]:
    return {dict(k)["vm_id"]: dict(k)["vm"] for k in m["vcenter_vm_info"]}


def _disks(m: dict, vm_id: str) -> set[str]:
    return {dict(k)["disk"] for k in m["vcenter_virtual_disk_info"] if dict(k)["vm_id"] == vm_id}


def test_changes_in_vcenter_show_up_without_a_full_read(scenario_sim, bursty_trace, exporter, soap_calls, caplog):
    """A VM renamed, a disk added, a VM destroyed and a VM cloned in vCenter each show up in the
    next probes (inventory_refresh 0.5s); the inventory is read whole once only."""
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN, "-vms", "3")
    exp = exporter(insecure_config(inventory_refresh="0.5s"), ENV)
    first = probe_until(exp, address, lambda m: True, "the first inventory")
    names = _vm_info(first)
    assert "synthetic-00001" in names.values() and len(names) >= 4
    by_name = {n: i for i, n in names.items()}
    admin = Admin(address)
    try:
        caplog.set_level(logging.INFO, logger=LOGGER)
        # renamed: the same vm_id under its new name, the old name gone
        WaitForTask(admin.vm("synthetic-00001").Rename_Task("renamed-01"))
        m = probe_until(
            exp, address, lambda m: _vm_info(m).get(by_name["synthetic-00001"]) == "renamed-01", "the rename"
        )
        assert "synthetic-00001" not in _vm_info(m).values()
        assert any(
            f"inventory of target={address} updated: 1 changes (0 entered, 1 modified, 0 left)" in r.getMessage()
            for r in caplog.records
        ), [r.getMessage() for r in caplog.records]

        # a disk added: the VM's disk info gains it
        vm = admin.vm("synthetic-00002")
        before = _disks(m, by_name["synthetic-00002"])
        disk = vim.vm.device.VirtualDisk(
            capacityInKB=1024 * 1024,
            controllerKey=next(
                d.key for d in vm.config.hardware.device if isinstance(d, vim.vm.device.VirtualSCSIController)
            ),
            unitNumber=9,
            backing=vim.vm.device.VirtualDisk.FlatVer2BackingInfo(diskMode="persistent"),
        )
        spec = vim.vm.ConfigSpec(
            deviceChange=[vim.vm.device.VirtualDeviceSpec(operation="add", fileOperation="create", device=disk)]
        )
        WaitForTask(vm.ReconfigVM_Task(spec))
        m = probe_until(
            exp, address, lambda m: len(_disks(m, by_name["synthetic-00002"])) == len(before) + 1, "the disk"
        )
        assert before < _disks(m, by_name["synthetic-00002"])

        # destroyed: its series go
        gone = admin.vm("synthetic-00003")
        WaitForTask(gone.PowerOffVM_Task())
        WaitForTask(gone.Destroy_Task())
        m = probe_until(exp, address, lambda m: by_name["synthetic-00003"] not in _vm_info(m), "the destroyed VM")
        assert not _disks(m, by_name["synthetic-00003"])

        # cloned: a new VM with its disks
        src = admin.vm("renamed-01")
        WaitForTask(
            src.CloneVM_Task(folder=src.parent, name="added-01", spec=vim.vm.CloneSpec(location=vim.vm.RelocateSpec()))
        )
        # The simulator may hand the clone over in two updates, the VM then its devices (a loaded run
        # probed between them): the inventory follows both, so the clone ends up listed with its disks.
        source_disks = _disks(m, by_name["synthetic-00001"])
        assert source_disks

        def clone_with_disks(m) -> bool:
            added = [i for i, n in _vm_info(m).items() if n == "added-01"]
            return len(added) == 1 and _disks(m, added[0]) == source_disks

        probe_until(exp, address, clone_with_disks, "the clone with its source's disks")
    finally:
        admin.close()
    # One full read (a collector and a filter of its own), everything after it updates only.
    assert soap_calls["CreatePropertyCollector"] == 1 and soap_calls["CreateFilter"] == 1, soap_calls
    assert soap_calls["RetrievePropertiesEx"] == 0, soap_calls
    assert soap_calls["WaitForUpdatesEx"] >= 5  # the full read, then at least one per change
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and address in r.getMessage()]


def test_a_lost_collector_is_logged_and_answered_by_a_full_read(
    scenario_sim, bursty_trace, exporter, soap_calls, caplog
):
    """The exporter's PropertyCollector destroyed on the server (as a vCenter restart of its
    property service would): the next update fails, one warning names the target and the
    server's fault, the inventory is read whole through a new collector, and probes stay up."""
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN, "-vms", "2")
    exp = exporter(insecure_config(inventory_refresh="0.3s"), ENV)
    probe_until(exp, address, lambda m: True, "the first inventory")
    target = exp.targets.get(address)
    deadline = time.monotonic() + 60
    while soap_calls["WaitForUpdatesEx"] < 2:  # the first update after the full read went through
        assert time.monotonic() < deadline
        time.sleep(0.1)
    collector = target._watch._collector
    assert collector
    caplog.set_level(logging.INFO, logger=LOGGER)
    target.client.call(lambda si: client.post(si, destroy_collector_body(collector), "DestroyPropertyCollector"))
    deadline = time.monotonic() + 60
    while soap_calls["CreatePropertyCollector"] < 2:
        assert time.monotonic() < deadline, soap_calls
        time.sleep(0.1)
    m = probe_until(exp, address, lambda m: True, "a probe after the fallback")
    assert m["vcenter_virtual_disk_info"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert f"inventory updates of target={address} failed cause=" in warnings[0]
    assert "reading the whole inventory again" in warnings[0]
    assert "ManagedObjectNotFound" in warnings[0] or collector in warnings[0], warnings[0]
    assert target._watch.fallbacks == 1 and target._watch._collector != collector


ENVELOPE = (
    b'<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" '
    b'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body>'
    b'<WaitForUpdatesExResponse xmlns="urn:vim25">%s</WaitForUpdatesExResponse></soapenv:Body></soapenv:Envelope>'
)


def _update(objects: bytes, version: bytes = b"7") -> bytes:
    return ENVELOPE % (
        b"<returnval><version>"
        + version
        + b'</version><filterSet><filter type="PropertyFilter">f1</filter>'
        + objects
        + b"</filterSet></returnval>"
    )


def _change(name: bytes, val: bytes, op: bytes = b"assign") -> bytes:
    return b"<changeSet><name>" + name + b"</name><op>" + op + b"</op>" + val + b"</changeSet>"


def test_update_sets_are_applied_enter_modify_leave():
    """Parsing and applying updates: a VM and its host enter, the host is renamed (the VM's host
    label follows), the VM's power state is removed, then the VM leaves; no answer = no change."""
    state = InventoryState()
    enter = _update(
        b'<objectSet><kind>enter</kind><obj type="HostSystem">host-1</obj>'
        + _change(b"name", b'<val xsi:type="xsd:string">esx-a</val>')
        + b'</objectSet><objectSet><kind>enter</kind><obj type="VirtualMachine">vm-1</obj>'
        + _change(b"name", b'<val xsi:type="xsd:string">db-01</val>')
        + _change(b"runtime.host", b'<val type="HostSystem" xsi:type="ManagedObjectReference">host-1</val>')
        + _change(b"runtime.powerState", b'<val xsi:type="VirtualMachinePowerState">poweredOn</val>')
        + b"</objectSet>"
    )
    parsed = parse_update_set(enter)
    assert parsed.version == "7" and not parsed.truncated and [o.kind for o in parsed.objects] == ["enter", "enter"]
    for obj in parsed.objects:
        state.apply(obj)
    (vm,) = state.inventory()
    assert (vm.moref, vm.name, vm.host, vm.power_state, vm.disks) == ("vm-1", "db-01", "esx-a", "poweredOn", ())
    for obj in parse_update_set(
        _update(
            b'<objectSet><kind>modify</kind><obj type="HostSystem">host-1</obj>'
            + _change(b"name", b'<val xsi:type="xsd:string">esx-b</val>')
            + b'</objectSet><objectSet><kind>modify</kind><obj type="VirtualMachine">vm-1</obj>'
            + _change(b"runtime.powerState", b"", b"indirectRemove")
            + b"</objectSet>",
            b"8",
        )
    ).objects:
        state.apply(obj)
    (vm,) = state.inventory()
    assert (vm.host, vm.power_state) == ("esx-b", "")
    for obj in parse_update_set(
        _update(b'<objectSet><kind>leave</kind><obj type="VirtualMachine">vm-1</obj></objectSet>')
    ).objects:
        state.apply(obj)
    assert state.inventory() == []
    nothing = parse_update_set(ENVELOPE % b"")
    assert nothing.version is None and nothing.objects == []


@pytest.mark.parametrize(
    "body, fragment",
    [
        (b"not xml", "WaitForUpdatesEx answer (HTTP 200) is not XML"),
        (ENVELOPE % b"<returnval><filterSet/></returnval>", "update set without a version"),
        (_update(b'<objectSet><obj type="VirtualMachine">vm-1</obj></objectSet>'), "without obj or kind"),
    ],
)
def test_malformed_update_answers_are_protocol_errors(body, fragment):
    with pytest.raises(TargetError) as err:
        parse_update_set(body)
    assert err.value.kind == "protocol" and fragment in err.value.cause


@pytest.mark.parametrize(
    "change, fragment",
    [
        (_change(b"config.hardware.device[2000].backing", b"<val/>"), "changes 'config.hardware.device[2000].backing'"),
        (_change(b"guest.disk", b"<val/>", b"add"), "has op 'add' on 'guest.disk'"),
    ],
)
def test_a_change_not_asked_for_is_refused_so_the_inventory_is_read_whole(change, fragment):
    """partialUpdates is false: a nested path or an add to an array means the answer is not what
    was asked for; the update fails (and the watch reads the inventory whole)."""
    (obj,) = parse_update_set(
        _update(b'<objectSet><kind>modify</kind><obj type="VirtualMachine">vm-1</obj>' + change + b"</objectSet>")
    ).objects
    with pytest.raises(TargetError) as err:
        InventoryState().apply(obj)
    assert err.value.kind == "protocol" and fragment in err.value.cause


def test_a_capture_anonymizes_names_in_update_answers_too():
    """Captures record the paged RetrievePropertiesEx, but the anonymizer also learns the names a
    WaitForUpdatesEx answer carries (changeSet), so no VM or host name could leak from one."""
    from ioparallax.exporters.common.anonymize import Anonymizer
    from ioparallax.exporters.vcenter.capture import learn

    answer = _update(
        b'<objectSet><kind>enter</kind><obj type="VirtualMachine">vm-1</obj>'
        + _change(b"name", b'<val xsi:type="xsd:string">payroll-db-01</val>')
        + b'</objectSet><objectSet><kind>modify</kind><obj type="HostSystem">host-1</obj>'
        + _change(b"name", b'<val xsi:type="xsd:string">esx-secret.corp</val>')
        + b"</objectSet>"
    )
    anon = Anonymizer()
    learn(anon, answer)
    out = anon.bytes(answer)
    assert b"payroll-db-01" not in out and b"esx-secret.corp" not in out
    assert b"vm-1" in out and b"host-1" in out  # morefs are kept
