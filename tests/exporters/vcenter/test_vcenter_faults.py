"""Faults of issue 14 against real simulators: a vCenter restart between probes (re-login, not a
failed probe), a powered-off and a destroyed VM (no stale latest-sample values, counters kept
then gone), samples that stop arriving, and two VMs of the same name (no duplicate series)."""

from __future__ import annotations

import http.client
import logging
import ssl
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim

from ioparallax.exporters.vcenter import target as target_module
from tests.simulators.vcenter.test_vcenter_simulator import FROZEN
from tests.support import ShiftedClock, metric_value as value, parse_metrics, promtool_check_metrics

from .conftest import PASSWORD, USER, insecure_config

ENV = {"VC_TEST_PASSWORD": PASSWORD}
DATA = Path(__file__).parent / "data"
SAMPLE_GAUGES = (
    "vcenter_virtual_disk_sample_write_bytes_per_second",
    "vcenter_virtual_disk_sample_read_ops_per_second",
    "vcenter_virtual_disk_sample_write_latency_seconds",
)
COUNTERS = (
    "vcenter_virtual_disk_write_bytes_total",
    "vcenter_virtual_disk_write_ops_total",
    "vcenter_virtual_disk_samples_total",
)


class Admin:
    """A pyvmomi session to the simulator, doing what a vSphere admin would."""

    def __init__(self, address: str):
        host, port = address.rsplit(":", 1)
        self.si = SmartConnect(
            host=host, port=int(port), user=USER, pwd=PASSWORD, sslContext=ssl._create_unverified_context()
        )

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


def probe_until(exp, address: str, done, what: str = "the change", timeout: float = 60.0) -> dict:
    """Probe until ``done(metrics)``: the event a test waits for (a background inventory refresh
    has read a change) instead of a sleep that guesses how long the refresh takes. Every probe
    on the way must be up."""
    deadline = time.monotonic() + timeout
    while True:
        m = exp.probe(address)
        assert value(m, "vcenter_up") == 1, m.get("vcenter_probe_error_info")
        if done(m):
            return m
        assert time.monotonic() < deadline, f"{what} never showed"
        time.sleep(0.1)


def test_vcenter_restart_between_probes_logs_in_again(scenario_sim, bursty_trace, exporter, processes, caplog):
    """The kept-alive connection dies with the old process and the session with it: the probe
    after the restart reconnects, meets NotAuthenticated, logs in once and succeeds."""
    path, _ = bursty_trace
    caplog.set_level(logging.INFO, logger="ioparallax.exporters.vcenter.client")
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
    other = next(n for n in names if n.startswith("synthetic"))  # not a CVM: a VM with disks
    for name in SAMPLE_GAUGES:
        assert _series(before, name, vm="burst-01") and _series(before, name, vm=other), name

    admin = Admin(address)
    try:
        vm = admin.vm("burst-01")
        WaitForTask(vm.PowerOffVM_Task())
        # the refresh (inventory_refresh 1s) that reads the power state, however long it takes
        off = probe_until(
            exp, address, lambda m: _series(m, "vcenter_vm_info", vm="burst-01", power_state="poweredOff")
        )
        assert value(off, "vcenter_vm_info", vm="burst-01", power_state="poweredOff") == 1
        for name in SAMPLE_GAUGES:
            assert _series(off, name, vm="burst-01") == {}, f"stale {name}"
            assert _series(off, name, vm=other), name
        for name in COUNTERS:
            assert _series(off, name, vm="burst-01") == _series(before, name, vm="burst-01"), name
        # the newest sample's end stays, so its age shows the VM stopped reporting
        assert _series(off, "vcenter_virtual_disk_sample_timestamp_seconds", vm="burst-01")

        WaitForTask(vm.Destroy_Task())
        gone = probe_until(exp, address, lambda m: not _series(m, "vcenter_vm_info", vm="burst-01"))
        leftover = [(n, dict(k)) for n, s in gone.items() for k in s if dict(k).get("vm") == "burst-01"]
        assert leftover == []
        assert _series(gone, COUNTERS[0], vm=other)
    finally:
        admin.close()


def test_samples_that_stop_are_not_shown_as_current(scenario_sim, bursty_trace, exporter, monkeypatch):
    """A vCenter whose samples stop (here the simulator's clock is frozen): after sample_max_age
    the latest-sample gauges disappear, counters and vcenter_up 1 stay. The exporter's clock is
    moved by the test (30 s, then 90 s past the first sample, for a 60 s sample_max_age), so the
    time a loaded machine takes between probes does not decide which side of the limit they fall."""
    clock = ShiftedClock()
    monkeypatch.setattr(target_module, "time", clock)
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    exp = exporter(insecure_config(sample_max_age="60s"), ENV)
    first = exp.probe(address)
    assert _series(first, SAMPLE_GAUGES[0], vm="burst-01")
    clock.offset = 30.0
    assert _series(exp.probe(address), SAMPLE_GAUGES[0], vm="burst-01"), "within sample_max_age"
    clock.offset = 90.0
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
    samples = [
        (s.name, tuple(sorted(s.labels.items()))) for fam in text_string_to_metric_families(text) for s in fam.samples
    ]
    duplicates = [k for k, n in Counter(samples).items() if n > 1]
    assert duplicates == []
    m = parse_metrics(text)
    ids = {dict(k)["vm_id"] for k in _series(m, "vcenter_vm_info", vm="burst-01")}
    assert len(ids) == 2 and all(i.startswith("vm-") for i in ids)
    for name in ("vcenter_virtual_disk_info", "vcenter_virtual_disk_write_bytes_total"):
        assert {dict(k)["vm_id"] for k in _series(m, name, vm="burst-01", disk="scsi0:1")} == ids, name
    result = promtool_check_metrics(text)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


class FaultingProxy:
    """An HTTPS relay to the simulator that answers the next QueryPerf with a SOAP fault (HTTP 500,
    as vCenter sends it), for what the simulator does not do: a real vCenter answers
    ManagedObjectNotFound for a VM deleted since the inventory was read; the simulator's
    PerformanceManager still answers for it."""

    def __init__(self, upstream: str, cert, key):
        host, port = upstream.rsplit(":", 1)
        self.fault: bytes | None = None
        self.faults_sent = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def _relay(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if body and b"<QueryPerf" in body and proxy.fault is not None:
                    data, proxy.fault = proxy.fault, None
                    proxy.faults_sent += 1
                    self.send_response(500)
                    self.send_header("Content-Type", "text/xml; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                conn = http.client.HTTPSConnection(
                    host, int(port), context=ssl._create_unverified_context(), timeout=30
                )
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")
                }
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = _relay

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.address = f"127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_vm_deleted_before_the_inventory_refresh(scenario_sim, bursty_trace, exporter, tmp_path, caplog):
    """QueryPerf answers ManagedObjectNotFound for a VM deleted while the inventory is cached: the
    probe reads the inventory again and collects once more (vcenter_up 1, the VM's series gone),
    instead of failing until the next refresh."""
    from .test_vcenter_security import _self_signed

    path, _ = bursty_trace
    upstream, _ = scenario_sim(path, "-freeze-at", FROZEN, "-vms", "1")
    proxy = FaultingProxy(upstream, *_self_signed(tmp_path))
    try:
        exp = exporter(insecure_config(), ENV)
        before = exp.probe(proxy.address)
        assert value(before, "vcenter_up") == 1 and _series(before, COUNTERS[0], vm="burst-01")
        admin = Admin(upstream)
        try:
            vm = admin.vm("burst-01")
            moref = vm._moId
            WaitForTask(vm.PowerOffVM_Task())
            WaitForTask(vm.Destroy_Task())
        finally:
            admin.close()
        recorded = (DATA / "fault-managed-object-not-found.xml").read_bytes()
        proxy.fault = recorded.replace(b"PerformanceManager:PerfMgrNope", f"VirtualMachine:{moref}".encode()).replace(
            b'type="PerformanceManager">PerfMgrNope', f'type="VirtualMachine">{moref}'.encode()
        )
        with caplog.at_level(logging.INFO, logger="ioparallax.exporters.vcenter.target"):
            after = exp.probe(proxy.address)
        assert proxy.faults_sent == 1
        assert value(after, "vcenter_up") == 1, after.get("vcenter_probe_error_info")
        assert [n for n, s in after.items() for k in s if dict(k).get("vm") == "burst-01"] == []
        assert [dict(k)["vm"] for k in after["vcenter_vm_info"]] != []
        assert "cached inventory is gone" in caplog.text
    finally:
        proxy.close()
