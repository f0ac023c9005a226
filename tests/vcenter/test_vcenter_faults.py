"""Faults of issue 14 against real simulators: a vCenter restart between probes (re-login, not a
failed probe), a powered-off and a destroyed VM (no stale latest-sample values, counters kept
then gone), samples that stop arriving, and two VMs of the same name (no duplicate series)."""

from __future__ import annotations

import logging
import ssl
import time
from collections import Counter

from prometheus_client.parser import text_string_to_metric_families
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from tests.support import promtool_check_metrics

from .conftest import PASSWORD, USER, insecure_config, parse_metrics, value
from .test_vcenter_simulator import FROZEN

ENV = {"VC_TEST_PASSWORD": PASSWORD}
SAMPLE_GAUGES = ("vcenter_virtual_disk_sample_write_bytes_per_second", "vcenter_virtual_disk_sample_read_ops_per_second",
                 "vcenter_virtual_disk_sample_write_latency_seconds")
COUNTERS = ("vcenter_virtual_disk_write_bytes_total", "vcenter_virtual_disk_write_ops_total",
            "vcenter_virtual_disk_samples_total")


class Admin:
    """A pyvmomi session to the simulator, doing what a vSphere admin would."""

    def __init__(self, address: str):
        host, port = address.rsplit(":", 1)
        self.si = SmartConnect(host=host, port=int(port), user=USER, pwd=PASSWORD,
                               sslContext=ssl._create_unverified_context())

    def vm(self, name: str) -> vim.VirtualMachine:
        content = self.si.content
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        try:
            return next(v for v in view.view if v.name == name)
        finally:
            view.Destroy()

    def close(self):
        Disconnect(self.si)


def WaitForTask(task, timeout: float = 30.0) -> None:
    """Poll a task to its end (pyVim's WaitForTask trips over vcsim's task names)."""
    deadline = time.monotonic() + timeout
    while task.info.state not in ("success", "error"):
        assert time.monotonic() < deadline, f"task {task} did not finish"
        time.sleep(0.05)
    assert task.info.state == "success", task.info.error


def _series(m: dict, name: str, **labels) -> dict:
    return {k: v for k, v in m.get(name, {}).items() if all(dict(k).get(a) == b for a, b in labels.items())}


def test_vcenter_restart_between_probes_logs_in_again(scenario_sim, bursty_trace, exporter, processes, caplog):
    """The kept-alive connection dies with the old process and the session with it: the probe
    after the restart reconnects, meets NotAuthenticated, logs in once and succeeds."""
    path, _ = bursty_trace
    caplog.set_level(logging.INFO, logger="exporters.vcenter.client")
    address, sim = scenario_sim(path, "-freeze-at", FROZEN)
    exp = exporter(insecure_config(), ENV)
    m = exp.probe(address)
    assert value(m, "vcenter_up") == 1 and value(m, "vcenter_session_logins_total") == 1
    for restart in (1, 2):
        sim.stop()
        address2, sim = scenario_sim(path, "-freeze-at", FROZEN, port=int(address.rsplit(":", 1)[1]))
        assert address2 == address
        m = exp.probe(address)
        assert value(m, "vcenter_up") == 1, m.get("vcenter_probe_error_info")
        assert value(m, "vcenter_session_logins_total") == 1 + restart
        assert value(m, "vcenter_probe_errors_total", kind="login") == 0
    assert "logging in again" in caplog.text


def test_powered_off_and_destroyed_vm(scenario_sim, bursty_trace, exporter):
    """Powered off: its latest-sample gauges disappear at the next inventory refresh, its counters
    keep their values (rates fall to 0); destroyed: every series of it disappears. The other VM
    is untouched."""
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN, "-vms", "1")
    exp = exporter(insecure_config(inventory_refresh="1s"), ENV)
    before = exp.probe(address)
    names = {dict(k)["vm"] for k in before["vcenter_vm_info"]}
    other = next(n for n in names if n != "burst-01")
    for name in SAMPLE_GAUGES:
        assert _series(before, name, vm="burst-01") and _series(before, name, vm=other), name

    admin = Admin(address)
    try:
        vm = admin.vm("burst-01")
        WaitForTask(vm.PowerOffVM_Task())
        time.sleep(1.2)
        off = exp.probe(address)
        assert value(off, "vcenter_up") == 1
        assert value(off, "vcenter_vm_info", vm="burst-01", power_state="poweredOff") == 1
        for name in SAMPLE_GAUGES:
            assert _series(off, name, vm="burst-01") == {}, f"stale {name}"
            assert _series(off, name, vm=other), name
        for name in COUNTERS:
            assert _series(off, name, vm="burst-01") == _series(before, name, vm="burst-01"), name
        # the newest sample's end stays, so its age shows the VM stopped reporting
        assert _series(off, "vcenter_virtual_disk_sample_timestamp_seconds", vm="burst-01")

        WaitForTask(vm.Destroy_Task())
        time.sleep(1.2)
        gone = exp.probe(address)
        assert value(gone, "vcenter_up") == 1
        leftover = [(n, dict(k)) for n, s in gone.items() for k in s if dict(k).get("vm") == "burst-01"]
        assert leftover == []
        assert _series(gone, COUNTERS[0], vm=other)
    finally:
        admin.close()


def test_samples_that_stop_are_not_shown_as_current(scenario_sim, bursty_trace, exporter):
    """A vCenter whose samples stop (here the simulator's clock is frozen): after sample_max_age
    the latest-sample gauges disappear, counters and vcenter_up 1 stay."""
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    exp = exporter(insecure_config(sample_max_age="2s"), ENV)
    first = exp.probe(address)
    assert _series(first, SAMPLE_GAUGES[0], vm="burst-01")
    time.sleep(1.0)
    assert _series(exp.probe(address), SAMPLE_GAUGES[0], vm="burst-01"), "within sample_max_age"
    time.sleep(1.5)
    later = exp.probe(address)
    assert value(later, "vcenter_up") == 1
    assert _series(later, SAMPLE_GAUGES[0], vm="burst-01") == {}
    assert _series(later, COUNTERS[0], vm="burst-01") == _series(first, COUNTERS[0], vm="burst-01")


def test_same_vm_name_in_two_folders_gives_no_duplicate_series(scenario_sim, bursty_trace, exporter):
    """vCenter allows one VM name in several folders: vm_id (the managed object id) keeps the
    series apart; the exposition has no duplicate series and passes promtool."""
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    admin = Admin(address)
    try:
        vm = admin.vm("burst-01")
        datacenter = admin.si.content.rootFolder.childEntity[0]
        folder = datacenter.vmFolder.CreateFolder("other-team")
        spec = vim.vm.CloneSpec(location=vim.vm.RelocateSpec(), powerOn=True)
        WaitForTask(vm.CloneVM_Task(folder=folder, name="burst-01", spec=spec))
        exp = exporter(insecure_config(), ENV)
        code, text = exp.probe_text(address)
    finally:
        admin.close()
    assert code == 200
    samples = [(s.name, tuple(sorted(s.labels.items()))) for fam in text_string_to_metric_families(text)
               for s in fam.samples]
    duplicates = [k for k, n in Counter(samples).items() if n > 1]
    assert duplicates == []
    m = parse_metrics(text)
    ids = {dict(k)["vm_id"] for k in _series(m, "vcenter_vm_info", vm="burst-01")}
    assert len(ids) == 2 and all(i.startswith("vm-") for i in ids)
    for name in ("vcenter_virtual_disk_info", "vcenter_virtual_disk_write_bytes_total"):
        assert {dict(k)["vm_id"] for k in _series(m, name, vm="burst-01", disk="scsi0:1")} == ids, name
    result = promtool_check_metrics(text)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()

