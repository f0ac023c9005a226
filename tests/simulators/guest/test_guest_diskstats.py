"""The guest kernel's /proc/diskstats computed from the trace: the format, the trace's values over a
window, and request splitting at the device's max_sectors_kb (ops multiply, bytes stay)."""

from __future__ import annotations

import math

import pytest

from ioparallax.simulators.guest.diskstats import FIELDS, GuestDiskstats, minor_of, parse, split_factor
from ioparallax.simulators.guest.fio import GuestFio
from ioparallax.simulators.guest.sysfs import MAX_SECTORS_KB
from ioparallax.simulators.guest.writer import GuestWriter, vm_diskstats
from ioparallax.simulators.scenario import BlockSizeMix, compile_scenario, list_scenarios, load_scenario

T0 = 1_800_000_000 - 1_800_000_000 % 600


def _stats(name: str) -> tuple[object, GuestDiskstats]:
    trace = compile_scenario(load_scenario(name))
    return trace, GuestDiskstats(trace, anchor=T0)


def test_lines_have_the_kernel_format():
    """20 columns per line (Linux 5.5+: major, minor, name, 17 counters), sdb at 8:16, its
    partition at 8:17 with zeros (fio writes to the raw device)."""
    trace, ds = _stats("misaligned")
    text = ds.text("misaligned-01", T0 + 700)
    lines = text.splitlines()
    assert [ln.split()[:3] for ln in lines] == [["8", "16", "sdb"], ["8", "17", "sdb1"]]
    assert all(len(ln.split()) == 20 for ln in lines)
    assert lines[0].startswith("   8      16 sdb ")  # "%4d %7d %s" as diskstats_show()
    stats = parse(text)
    assert set(stats["sdb1"].values()) == {0}
    assert stats["sdb"]["writes_completed"] > 0 and stats["sdb"]["reads_completed"] == 0
    assert (minor_of("sda"), minor_of("sdb"), minor_of("sdc"), minor_of("sdaa")) == (0, 16, 32, 416)
    assert len(FIELDS) == 17


@pytest.mark.parametrize("name", list_scenarios())
@pytest.mark.parametrize("start,seconds", [(37, 60), (590, 20), (300, 600)])
def test_diskstats_give_the_trace_over_a_window(name, start, seconds):
    """The difference of two snapshots is the trace's window: bytes (sectors x 512) within a
    sector, device requests = trace ops x ceil(size / 512 KiB) within one, ms reading/writing the
    device requests' latency sum within 1 ms, weighted ms their sum."""
    trace, ds = _stats(name)
    T1 = T0 + 600 + start
    T2 = T1 + seconds
    checked = 0
    for disk in trace.scenario.disks:
        a, b = ds.fields(disk, T1), ds.fields(disk, T2)
        per_stream = trace.stream_window(disk, end=T2 % trace.period, seconds=seconds)
        truth = trace.window(disk, end=T2 % trace.period, seconds=seconds)
        for d, done, sectors, ms in (
            ("read", "reads_completed", "sectors_read", "ms_reading"),
            ("write", "writes_completed", "sectors_written", "ms_writing"),
        ):
            reqs = sum(getattr(sec, f"{d}_ops") * split_factor(getattr(s, f"{d}_size")) for s, sec in per_stream)
            lat_ms = sum(
                getattr(sec, f"{d}_ops") * split_factor(getattr(s, f"{d}_size")) * getattr(s, f"{d}_latency_s") * 1000
                for s, sec in per_stream
            )
            assert abs((b[done] - a[done]) - reqs) <= 1, (disk.key, d)
            assert abs((b[sectors] - a[sectors]) * 512 - getattr(truth, f"{d}_bytes")) <= 512, (disk.key, d)
            assert abs((b[ms] - a[ms]) - lat_ms) <= 1, (disk.key, d)
            checked += reqs > 0
        assert (
            abs(
                (b["weighted_ms"] - a["weighted_ms"])
                - ((b["ms_reading"] - a["ms_reading"]) + (b["ms_writing"] - a["ms_writing"]))
            )
            <= 1
        )
        assert 0 <= b["ms_doing_io"] - a["ms_doing_io"] <= seconds * 1000
    assert checked


def test_splitting_doubles_ops_for_1mib_at_512kib_and_keeps_bytes():
    """misaligned: fio writes 1 MiB, the device's max request is 512 KiB, so over 60 s the block
    layer completes twice fio's writes for the same bytes, and its mean write latency is fio's."""
    assert MAX_SECTORS_KB == 512
    assert split_factor(BlockSizeMix.parse("1MiB")) == 2
    assert split_factor(BlockSizeMix.parse("4KiB")) == 1
    assert split_factor(BlockSizeMix.parse("4k/50:1m/50")) == pytest.approx(1.5)
    trace = compile_scenario(load_scenario("misaligned"))
    fio = GuestFio(trace, anchor=T0)
    ds = GuestDiskstats(trace, fio=fio)
    T1, T2 = T0 + 600 + 100, T0 + 600 + 160
    disk = next(d for d in trace.scenario.disks if d.vm == "aligned-01")
    f1 = fio.record("aligned-01", T1)["jobs"][0]["write"]
    f2 = fio.record("aligned-01", T2)["jobs"][0]["write"]
    d1, d2 = ds.fields(disk, T1), ds.fields(disk, T2)
    fio_ops, fio_bytes = f2["total_ios"] - f1["total_ios"], f2["io_bytes"] - f1["io_bytes"]
    dev_ops = d2["writes_completed"] - d1["writes_completed"]
    dev_bytes = (d2["sectors_written"] - d1["sectors_written"]) * 512
    assert fio_ops == 210 * 60 and fio_bytes == 210 * 60 * 1048576
    assert dev_ops == 2 * fio_ops == 25200
    assert dev_bytes == fio_bytes
    mean_ms = (d2["ms_writing"] - d1["ms_writing"]) / dev_ops
    assert mean_ms == pytest.approx(19.0, abs=1e-3)
    # Little's law: 420 requests/s x 19 ms in flight
    assert d2["ios_in_progress"] == round(420 * 0.019)


def test_bursty_diskstats_step_only_in_burst_seconds():
    """bursty-1m: 800 device writes (400 x 1 MiB split in two) in the burst second, none in the 19 after."""
    trace, ds = _stats("bursty-1m")
    disk = trace.scenario.disks[0]
    w = [ds.fields(disk, T0 + 600 + t)["writes_completed"] for t in range(22)]
    steps = [b - a for a, b in zip(w, w[1:])]
    assert steps[0] == 800 and steps[20] == 800
    assert all(s == 0 for s in steps[1:20])


def test_writer_keeps_a_diskstats_file_per_vm(tmp_path):
    trace = compile_scenario(load_scenario("misaligned"))
    writer = GuestWriter(trace, tmp_path, anchor=T0)
    paths = writer.setup()
    writer.write(T0 + 630)
    for vm in ("aligned-01", "misaligned-01"):
        path = vm_diskstats(tmp_path, vm)
        assert paths[vm]["procfs"] == str(path.parent)
        stats = parse(path.read_text())
        assert stats["sdb"] == writer.diskstats.fields(
            trace.scenario.vms[0].disks[0] if vm == "aligned-01" else trace.scenario.vms[1].disks[0], T0 + 630
        )
    # misaligned-01: 129 ops/s x 2 requests over the 630 s since the guest's "boot" at T0
    assert parse(vm_diskstats(tmp_path, "misaligned-01").read_text())["sdb"]["writes_completed"] == math.floor(
        129 * 2 * 630
    )


def _node_exporter(tmp_path, procfs, sysfs, udev, *extra):
    from tests.support import ManagedProcess, free_port, wait_for_http

    port = free_port()
    proc = ManagedProcess(
        "node-exporter",
        [
            "prometheus-node-exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--path.procfs={procfs}",
            f"--path.sysfs={sysfs}",
            f"--path.udev.data={udev}",
            "--collector.disable-defaults",
            "--collector.diskstats",
            *extra,
        ],
        tmp_path,
    )
    return proc, f"http://127.0.0.1:{port}/metrics", wait_for_http


def _samples(text: str) -> dict[str, dict[str, float]]:
    """{metric name: {device: value}} of the node_disk_* samples in an exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("node_disk_"):
                out.setdefault(s.name, {})[s.labels.get("device", "")] = (
                    s.value if s.name != "node_disk_info" else s.labels
                )
    return out


def test_real_node_exporter_reads_the_guest_diskstats(tmp_path):
    """Debian's node_exporter 1.5 on the simulated procfs/sysfs/udev: sdb is kept, its partition sdb1
    dropped by the default --collector.diskstats.device-exclude, the values are the file's (bytes =
    sectors x 512, seconds = ms / 1000), node_disk_info carries the udev serial (the disk UUID)."""
    import requests

    trace = compile_scenario(load_scenario("misaligned"))
    writer = GuestWriter(trace, tmp_path / "guests", anchor=T0)
    paths = writer.setup()
    writer.write(T0 + 630)
    where = paths["misaligned-01"]
    proc, url, wait = _node_exporter(tmp_path, where["procfs"], where["sysfs"], where["udev"])
    try:
        wait(url, proc=proc)
        text = requests.get(url, timeout=5).text
        log = proc.output()
    finally:
        proc.stop()
    m = _samples(text)
    f = parse(vm_diskstats(tmp_path / "guests", "misaligned-01").read_text())["sdb"]
    assert set(m["node_disk_writes_completed_total"]) == {"sdb"}  # sdb1 excluded
    assert m["node_disk_writes_completed_total"]["sdb"] == f["writes_completed"] == 129 * 2 * 630
    assert m["node_disk_written_bytes_total"]["sdb"] == f["sectors_written"] * 512 == 129 * 630 * 1048576
    assert m["node_disk_write_time_seconds_total"]["sdb"] == pytest.approx(f["ms_writing"] / 1000)
    assert m["node_disk_reads_completed_total"]["sdb"] == 0
    assert m["node_disk_io_now"]["sdb"] == round(258 * 0.031)
    info = m["node_disk_info"]["sdb"]
    disk = trace.scenario.vms[1].disks[0]
    assert info["serial"] == disk.uuid.replace("-", "").lower() and (info["major"], info["minor"]) == ("8", "16")
    assert "Failed to open directory" not in log


def test_node_exporter_device_exclude_is_what_drops_the_partition(tmp_path):
    """Without an exclude pattern node_exporter shows sdb1 too: the partition line is in the file and
    the default exclude is what hides it."""
    import requests

    trace = compile_scenario(load_scenario("misaligned"))
    writer = GuestWriter(trace, tmp_path / "guests", anchor=T0)
    where = writer.setup()["aligned-01"]
    writer.write(T0 + 630)
    proc, url, wait = _node_exporter(
        tmp_path, where["procfs"], where["sysfs"], where["udev"], "--collector.diskstats.device-exclude=^$"
    )
    try:
        wait(url, proc=proc)
        text = requests.get(url, timeout=5).text
    finally:
        proc.stop()
    m = _samples(text)
    assert set(m["node_disk_writes_completed_total"]) == {"sdb", "sdb1"}
    assert m["node_disk_writes_completed_total"]["sdb1"] == 0
    assert m["node_disk_writes_completed_total"]["sdb"] == 210 * 2 * 630
