"""The esxtop and vscsiStats views of a scenario (ioparallax/simulators/esxtop.py), read back
through esxtop-exporter: the bursty library scenario's 1 s bursts stand out in the 2 s VM view
and are flattened in the 20 s view vCenter averages from the same ground truth."""

from __future__ import annotations

import math
import threading
import time

from ioparallax.exporters.esxtop.reader import WatchConfig, Watcher
from ioparallax.exporters.esxtop.vscsi import parse_vscsistats
from ioparallax.simulators.esxtop import (
    EsxtopCapture,
    cvm_world_group_id,
    follow,
    vscsistats_text,
    world_group_id,
)
from ioparallax.simulators.scenario.model import load_scenario
from ioparallax.simulators.scenario.trace import compile_scenario
from tests.support import run_entry_point, samples, value

T0 = 1795860000  # a wall second; bursty-1m's origin is 0, its period 600 s: period second 0


def test_bursty_scenario_2s_view_shows_the_bursts_the_20s_view_flattens(tmp_path):
    trace = compile_scenario(load_scenario("bursty-1m"))
    assert trace.period_second(T0) == 0
    path = tmp_path / "esx-01.csv"
    EsxtopCapture(trace, "esx-01", delay=2).write(path, T0, 300)  # 600 s of samples, 2 s apart
    seen: list[tuple[float, float, float]] = []

    def on_sample(src, ts, states) -> None:
        (st,) = [s for s in states if s.kind == "vdisk" and s.key == ("burst-01", "scsi0:1")]
        assert st.latest is not None
        seen.append((ts, st.latest[2] or 0.0, st.latest[6] or 0.0))  # Writes/sec, MilliSec/Write

    watcher = Watcher(WatchConfig(paths=[str(path)], finished=True), on_sample=on_sample)
    watcher.read_all()
    assert len(seen) == 300
    # a burst of 400 writes/s for 1 s every 20 s: the 2 s sample holding it reads 200/s at 80 ms
    bursts = [(ts, w, ms) for ts, w, ms in seen if w > 0]
    assert len(bursts) == 30
    assert {(w, ms) for _, w, ms in bursts} == {(200.0, 80.0)}
    assert [ts - T0 for ts, _, _ in bursts[:2]] == [2, 22]  # the sample ending after second 0, 20
    # vCenter's 20 s sample of the same truth: 20 writes/s, 10x less than the 2 s view's peak
    disk = trace.disk("burst-01/scsi0:1")
    assert trace.window(disk, 20, 20).rate("write_ops") == 20.0
    # integrated, both views agree on the total: 30 bursts x 400 writes
    src = watcher.files[str(path)]
    (st,) = [s for s in src.objects.values() if s.kind == "vdisk"]
    assert st.totals[2] == 12000.0
    assert st.totals[4] == 12000.0 * 1048576  # bytes written: 1 MiB each


def test_the_exporter_serves_the_simulated_capture_and_its_vscsistats(tmp_path):
    out = run_entry_point("esxtop-simulator", ["bursty-1m", "--out", tmp_path, "--samples", "300"])
    assert out.returncode == 0, out.stderr
    conv = run_entry_point("esxtop-exporter", ["convert", tmp_path / "esx-01.csv", tmp_path / "esx-01-vscsi.csv"])
    assert conv.returncode == 0, conv.stderr
    sm = samples(conv.stdout)
    d = {"vm": "burst-01", "disk": "scsi0:1"}
    # any 600 s holds 30 bursts of 400 writes
    assert value(sm, "esxtop_virtual_disk_write_ops_total", **d) == 12000
    assert value(sm, "esxtop_nfs_volume_write_ops_total", datastore="ctr01") == 12000
    assert value(sm, "esxtop_source_sample_interval_seconds", source=tmp_path / "esx-01.csv") == 2
    # vscsiStats of the same 600 s, named by the capture's Group Cpu: 1 MiB writes at QD32, ~80 ms
    assert value(sm, "vscsistats_write_io_length_bytes_count", **d) == 12000
    assert value(sm, "vscsistats_write_io_length_bytes_bucket", le="524288.0", **d) == 0  # all above 512 KiB
    assert value(sm, "vscsistats_outstanding_ios_bucket", le="28.0", **d) == 0
    assert value(sm, "vscsistats_outstanding_ios_bucket", le="32.0", **d) == 12000
    within = value(sm, "vscsistats_write_latency_seconds_bucket", le="0.1", **d) - value(
        sm, "vscsistats_write_latency_seconds_bucket", le="0.05", **d
    )
    # log-normal with mean 80 ms and sigma 0.35 (the scenario's): 67 % of it in (50, 100] ms
    mu = math.log(0.08) - 0.35**2 / 2

    def cdf(x: float) -> float:
        return 0.5 * (1 + math.erf((math.log(x) - mu) / (0.35 * math.sqrt(2))))

    assert abs(within - 12000 * (cdf(0.1) - cdf(0.05))) <= 1
    assert round(within / 12000, 2) == 0.67
    assert value(sm, "vscsistats_read_io_length_bytes_count", **d) == 0


def test_vscsistats_text_is_what_the_parser_reads():
    trace = compile_scenario(load_scenario("clean-oltp"))
    host = trace.scenario.vms[0].host
    hists, skipped = parse_vscsistats(vscsistats_text(trace, host, T0 + 600, 600))
    assert skipped == []
    vms = [vm for vm in trace.scenario.vms if vm.host == host]
    assert len(hists) == 16 * sum(len(vm.disks) for vm in vms)
    assert {h.world_group_id for h in hists} == {str(world_group_id(trace, vm.name)) for vm in vms}
    for h in hists:  # every histogram's buckets add up to its count (the parser checks it too)
        assert h.count == h.stats["count"]
    all_ops = {(h.world_group_id, h.disk): h.count for h in hists if h.family == "io_length" and h.op == "all"}
    reads = {(h.world_group_id, h.disk): h.count for h in hists if h.family == "io_length" and h.op == "read"}
    writes = {(h.world_group_id, h.disk): h.count for h in hists if h.family == "io_length" and h.op == "write"}
    for k, n in all_ops.items():
        assert abs(n - reads[k] - writes[k]) <= 1  # each rounded on its own


def test_live_capture_grows_a_row_per_delay(tmp_path):
    trace = compile_scenario(load_scenario("bursty-1m"))
    stop = threading.Event()
    t = threading.Thread(target=follow, args=(trace, tmp_path, 1, stop, 2), daemon=True)
    t.start()
    path = tmp_path / "esx-01.csv"
    deadline = time.monotonic() + 120  # a condition, not a duration: generous for a loaded machine
    try:
        while time.monotonic() < deadline:
            if path.exists() and path.read_text().count("\n") >= 4 and (tmp_path / "esx-01-vscsi.csv").exists():
                break
            time.sleep(0.1)
    finally:
        stop.set()
        t.join(30)
    lines = path.read_text().splitlines()
    assert len(lines) >= 4 and lines[0].startswith('"(PDH-CSV 4.0) (UTC)(0)"')
    watcher = Watcher(WatchConfig(paths=[str(tmp_path)], finished=True))
    watcher.read_all()
    src = watcher.files[str(path)]
    assert src.reason is None and src.rows >= 3 and src.mean_interval == 1.0
    assert watcher.vm_names() == {
        str(world_group_id(trace, "burst-01")): "burst-01",
        str(cvm_world_group_id(trace, "esx-01")): "NTNX-SIMBLK01-A-CVM",
    }


def _columns(capture: EsxtopCapture, wall: int) -> dict[str, float]:
    """Header column (without the host) -> value of the row at ``wall``."""
    head = [c.strip('"') for c in capture.header().strip().split('","')][1:]
    row = [float(c.strip('"')) for c in capture.row(wall).strip().split('","')[1:]]
    return {h.split("\\", 3)[-1]: v for h, v in zip(head, row)}


def test_cvm_group_cpu_is_the_scenarios_cvm_share_of_the_host():
    sc = load_scenario("db-density")
    trace = compile_scenario(sc)
    cc = sc.cluster.cpu
    assert (cc.cvm_share, cc.cores, cc.cvm_vcpus) == (0.05, 24, 8)  # the scenario's truth
    cap = EsxtopCapture(trace, "esx-01", delay=2)
    cols = _columns(cap, T0 + 2)
    gid = cvm_world_group_id(trace, "esx-01")
    cvm = f"Group Cpu({gid}:NTNX-SIMBLK01-A-CVM)"
    # % Used is % of one core summed over the vCPUs: 5 % of 24 cores = 1.2 cores = 120 %
    assert cols[f"{cvm}\\% Used"] == round(cc.cvm_share * cc.cores * 100, 2) == 120.0
    # the same MHz the vCenter simulator's cpu.usagemhz of the CVM averages
    mhz = trace.cvm_cpu["esx-01"].usage_mhz[trace.period_second(T0)]
    assert mhz == cc.cvm_share * cc.host_capacity_mhz == 3120.0
    assert cols[f"{cvm}\\% Used"] == round(mhz / cc.core_mhz * 100, 2)
    # % Ready: the ready seconds of the CVM's 8 vCPUs over the 2 s, x 100
    _, ready_s = trace.cvm_cpu["esx-01"].window(trace.period_second(T0 + 2), 2)
    assert ready_s > 0
    assert cols[f"{cvm}\\% Ready"] == round(ready_s / 2 * 100, 2)
    assert cols[f"{cvm}\\% CoStop"] == 0.0
    # no Virtual Disk columns for the CVM (its data disks are passed through on ESXi)
    assert not [c for c in cols if c.startswith("Virtual Disk(NTNX-")]
    # a VM's % Used is its own truth, not the CVM's: db-01's MHz over one core's
    vm_mhz, _ = trace.vm_cpu["db-01"].window(trace.period_second(T0 + 2), 2)
    vm_used = cols[f"Group Cpu({world_group_id(trace, 'db-01')}:db-01)\\% Used"]
    assert vm_used == round(vm_mhz / 2 / cc.core_mhz * 100, 2)


def test_the_exporter_serves_the_cvm_cpu_every_sample(tmp_path):
    out = run_entry_point("esxtop-simulator", ["db-density", "--out", tmp_path, "--samples", "30"])
    assert out.returncode == 0, out.stderr
    conv = run_entry_point("esxtop-exporter", ["convert", tmp_path / "esx-02.csv"])
    assert conv.returncode == 0, conv.stderr
    sm = samples(conv.stdout)
    cvm = {"host": "esx-02", "vm": "NTNX-SIMBLK01-B-CVM"}  # what the dashboards' NTNX-.*-CVM selects
    # 1.2 cores used (5 % of 24) in each of 30 samples 2 s apart: 72 CPU seconds
    assert value(sm, "esxtop_vm_cpu_sample_used_ratio", **cvm) == 1.2
    assert value(sm, "esxtop_vm_cpu_used_seconds_total", **cvm) == 72.0
    assert value(sm, "esxtop_vm_cpu_samples_total", **cvm) == 30
    assert value(sm, "esxtop_vm_cpu_ready_seconds_total", **cvm) > 0
    gid = str(cvm_world_group_id(compile_scenario(load_scenario("db-density")), "esx-02"))
    assert value(sm, "esxtop_vm_info", gid=gid, **cvm) == 1
