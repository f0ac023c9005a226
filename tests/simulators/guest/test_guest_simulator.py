"""The guest simulator: fio json+ status records and sysfs trees computed from the trace, read back
with the fio exporter's own reader and disk-facts code (what `fio-exporter serve` runs)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from ioparallax.exporters.fio.collector import FioCollector
from ioparallax.exporters.fio.guestdisk import read_disks
from ioparallax.exporters.fio.histogram import cumulative_buckets
from ioparallax.exporters.fio.parse import parse_document
from ioparallax.exporters.fio.reader import WatchConfig, Watcher, read_text
from ioparallax.simulators.guest.fio import GuestFio, plat_idx_to_val, plat_val_to_idx
from ioparallax.simulators.guest.sysfs import write_tree
from ioparallax.simulators.guest.writer import GuestWriter, vm_paths
from ioparallax.simulators.scenario import compile_scenario, list_scenarios, load_scenario
from tests.support import fio_job_args, require_tool

# A fixed wall clock: the start of a period for every library scenario (600 s periods).
T0 = 1_800_000_000 - 1_800_000_000 % 600


def _jobs_by_disk(fio: GuestFio, vm: str, record: dict) -> dict[str, list]:
    """Parsed jobs of a record, grouped by the scenario disk their filename names."""
    rec = parse_document(record)
    devices = {f"/dev/{job.disk.guest_device}": job.disk.key for job in fio.jobs[vm]}
    out: dict[str, list] = {}
    for job in rec.jobs:
        out.setdefault(devices[job.options["filename"]], []).append(job)
    return out


def _totals(jobs: list, d: str) -> tuple[int, int, float, int]:
    """(ios, bytes, clat sum ns, clat N) of direction d summed over jobs."""
    ios = sum(j.directions[d].total_ios for j in jobs)
    nbytes = sum(j.directions[d].io_bytes for j in jobs)
    clat = [j.directions[d].clat for j in jobs if j.directions[d].clat is not None]
    return ios, nbytes, sum(c.sum_ns for c in clat), sum(c.count for c in clat)


def _continuous(fio: GuestFio, vm: str) -> bool:
    return all(job.continuous for job in fio.jobs[vm])


@pytest.mark.parametrize("name", list_scenarios())
@pytest.mark.parametrize("start,seconds", [(37, 60), (590, 20), (123, 1), (300, 600)])
def test_records_give_the_trace_over_a_window(name, start, seconds):
    """The difference of two records is the trace's window: ops and bytes within one per job
    (counts are rounded down), op-weighted latency to 1e-6."""
    trace = compile_scenario(load_scenario(name))
    fio = GuestFio(trace, anchor=T0)
    checked = 0
    for vm in trace.scenario.vms:
        if not _continuous(fio, vm.name):
            continue
        T1 = T0 + 600 + start  # the period after the anchor: the jobs ran the whole time
        T2 = T1 + seconds
        a = _jobs_by_disk(fio, vm.name, fio.record(vm.name, T1))
        b = _jobs_by_disk(fio, vm.name, fio.record(vm.name, T2))
        for disk in vm.disks:
            truth = trace.window(disk, end=T2 % trace.period, seconds=seconds)
            njobs = len(b[disk.key])
            for d in ("read", "write"):
                ios1, bytes1, lat1, n1 = _totals(a[disk.key], d)
                ios2, bytes2, lat2, n2 = _totals(b[disk.key], d)
                ops = getattr(truth, f"{d}_ops")
                assert abs((ios2 - ios1) - ops) <= njobs, (vm.name, disk.unit, d)
                assert abs((bytes2 - bytes1) - getattr(truth, f"{d}_bytes")) <= njobs
                assert n2 == ios2  # every I/O timed
                lat_sum = getattr(truth, f"{d}_latency_sum_s") * 1e9
                assert (lat2 - lat1) == pytest.approx(lat_sum, rel=1e-6, abs=1e-3)
                if ops >= 100:
                    mean = (lat2 - lat1) / (n2 - n1)
                    assert mean == pytest.approx(getattr(truth, f"{d}_latency_s") * 1e9, rel=1 / ops + 1e-6)
                checked += 1
    if name in ("noisy-neighbour", "scaling-ramp"):
        return  # jobs that start and stop inside the period: test_windowed_jobs
    assert checked


def test_bursty_guest_sees_the_burst_each_second():
    """bursty-1m: the record after a burst second holds 400 more 1 MiB writes; the 19 after, none."""
    trace = compile_scenario(load_scenario("bursty-1m"))
    fio = GuestFio(trace, anchor=T0)
    recs = [parse_document(fio.record("burst-01", T0 + 600 + t)) for t in range(22)]
    ios = [r.jobs[0].directions["write"].total_ios for r in recs]
    steps = [b - a for a, b in zip(ios, ios[1:])]
    assert steps[0] == 400 and steps[20] == 400
    assert all(s == 0 for s in steps[1:20])
    assert recs[1].jobs[0].directions["write"].clat.mean_ns == pytest.approx(80e6, rel=1e-6)


@pytest.mark.parametrize("name", list_scenarios())
def test_histogram_bins_are_fio_buckets_consistent_with_the_latency_model(name):
    trace = compile_scenario(load_scenario(name))
    fio = GuestFio(trace, anchor=T0)
    for vm in trace.scenario.vms:
        prev: dict[tuple[int, str], list[int]] = {}
        for t in range(40):
            rec = parse_document(fio.record(vm.name, T0 + 600 + 250 + t))
            for job in rec.jobs:
                for d, st in job.directions.items():
                    if st.clat is None:
                        continue
                    c = st.clat
                    # keys are fio bucket midpoints; counts sum to N
                    assert all(plat_idx_to_val(plat_val_to_idx(int(k))) == int(k) for k in c.bins)
                    cum, total = cumulative_buckets(c.bins)
                    assert total == c.count == st.total_ios
                    # cumulative buckets never go down (Prometheus would see a counter reset)
                    key = (job.jobid, d)
                    if key in prev:
                        assert all(x >= y for x, y in zip(cum, prev[key])), (vm.name, job.name, d)
                    prev[key] = cum
                    # the bins' mean is the clat mean within the buckets' 1 % resolution (+ sampling)
                    bmean = sum(int(k) * n for k, n in c.bins.items()) / c.count
                    assert bmean == pytest.approx(c.mean_ns, rel=0.02 + 3 / math.sqrt(c.count))
                    # fio's percentiles come from the same bins
                    p50 = dict(c.percentiles)[0.5]
                    assert c.min_ns <= p50 <= c.max_ns
                    below = sum(n for k, n in c.bins.items() if int(k) <= p50)
                    assert below >= c.count / 2


def test_windowed_jobs_run_in_their_window_only():
    """noisy-neighbour: the DSS scan runs in the second half of the period only; the record at
    its end holds exactly its window's I/O, and it is absent before it starts."""
    trace = compile_scenario(load_scenario("noisy-neighbour"))
    fio = GuestFio(trace, anchor=T0)
    dss_vm = next(vm for vm in trace.scenario.vms if any(not j.continuous for j in fio.jobs[vm.name]))
    job = next(j for j in fio.jobs[dss_vm.name] if not j.continuous)
    P = T0 + 600
    assert not parse_document(fio.record(dss_vm.name, P + job.start)).jobs
    assert parse_document(fio.record(dss_vm.name, P + job.start + 1)).jobs
    final = parse_document(fio.record(dss_vm.name, P + job.end)).jobs
    truth = trace.window(job.disk, end=job.end % 600, seconds=job.end - job.start)
    assert final[0].directions["read"].total_ios == math.floor(truth.read_ops + 1e-9)
    assert final[0].job_runtime_ms == (job.end - job.start) * 1000
    if job.end < 600:
        assert not parse_document(fio.record(dss_vm.name, P + job.end + 1)).jobs


def test_job_options_name_the_raw_device_and_the_scenario_options():
    trace = compile_scenario(load_scenario("zero-heavy"))
    fio = GuestFio(trace, anchor=T0)
    for vm in trace.scenario.vms:
        rec = parse_document(fio.record(vm.name, T0 + 10))
        for job, disk_job in zip(rec.jobs, fio.jobs[vm.name]):
            stream = disk_job.streams[0][1]
            assert job.options["filename"] == f"/dev/{disk_job.disk.guest_device}"
            assert job.options["zero_buffers"] == "1"
            assert job.options["iodepth"] == str(stream.iodepth) or "iodepth" in stream.fio_options
            assert job.name == stream.name


def test_record_has_the_shape_of_a_real_fio_json_plus_status_record(tmp_path):
    """Every key a real fio 3.33 prints (top level, job, direction, clat_ns) is in the simulated
    record, with the same JSON types."""
    require_tool("fio")
    out = tmp_path / "real.json"
    subprocess.run(
        [
            "fio",
            *fio_job_args(
                "shape",
                tmp_path,
                size="4m",
                rw="randrw",
                runtime=1,
                filename=tmp_path / "data",
                extra=("--rate_iops=100,50", "--output-format=json+", "--status-interval=1", f"--output={out}"),
            ),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    real = read_text(out.read_text())
    assert real.records
    docs = []
    text = out.read_text()
    dec = json.JSONDecoder()
    i = text.find("{")
    while i >= 0:
        doc, end = dec.raw_decode(text, i)
        docs.append(doc)
        i = text.find("{", end)
    real_doc = docs[-1]
    trace = compile_scenario(load_scenario("clean-oltp"))
    sim = GuestFio(trace, anchor=T0).record("oltp-01", T0 + 5)

    def same_shape(a: dict, b: dict, where: str, skip=()):
        for key, value in a.items():
            if key in skip:
                continue
            assert key in b, f"{where}: {key!r} missing"
            if isinstance(value, dict):
                assert isinstance(b[key], dict), f"{where}.{key}"
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                assert isinstance(b[key], (int, float)), f"{where}.{key}"
            else:
                assert type(b[key]) is type(value), f"{where}.{key}"

    same_shape(real_doc, sim, "top", skip=("disk_util",))  # disk_util: the host's disks, not the guest's
    rj, sj = real_doc["jobs"][0], sim["jobs"][0]
    same_shape(rj, sj, "job")
    for d in ("read", "write"):
        same_shape(rj[d], sj[d], d)
        same_shape(rj[d]["clat_ns"], sj[d]["clat_ns"], f"{d}.clat_ns")
        assert set(rj[d]["clat_ns"]["percentile"]) == set(sj[d]["clat_ns"]["percentile"])
    same_shape(rj["iodepth_level"], sj["iodepth_level"], "iodepth_level")
    same_shape(rj["latency_us"], sj["latency_us"], "latency_us")
    same_shape(rj["latency_ms"], sj["latency_ms"], "latency_ms")


@pytest.mark.parametrize("name", list_scenarios())
def test_sysfs_tree_gives_the_disk_uuid_and_alignment(name, tmp_path):
    sc = load_scenario(name)
    for vm in sc.vms:
        root = write_tree(vm, tmp_path / vm.name)
        disks = {d.name: d for d in read_disks(str(root))}
        assert set(disks) == {d.guest_device for d in vm.disks}
        for d in vm.disks:
            got = disks[d.guest_device]
            if sc.cluster.ahv:
                # a Nutanix vdisk: the vdisk's name and the vmdisk UUID, underscored (the rules
                # read the UUID out of it; the exporter's disk_uuid is for UUID serials only)
                assert (got.vendor, got.model) == ("NUTANIX", "VDISK")
                assert got.serial == f"NFS_1_0_{d.vdisk_id + 30000000}_{d.uuid.replace('-', '_')}"
                assert got.wwid == f"t10.NUTANIX {got.serial}" and got.disk_uuid == ""
            else:
                assert got.disk_uuid == d.uuid.lower()  # vCenter's form: joins without regexes
                assert got.serial == d.uuid.replace("-", "").lower()
            assert got.size_bytes == d.capacity_bytes
            (part,) = got.partitions
            assert part.start_bytes == d.partition_start_bytes
            assert part.aligned == (d.partition_start_bytes % 4096 == 0)


def test_misaligned_partition_starts_at_sector_3(tmp_path):
    sc = load_scenario("misaligned")
    vm = next(v for v in sc.vms if v.name == "misaligned-01")
    root = write_tree(vm, tmp_path / "sys")
    assert (root / "block" / "sdb" / "sdb1" / "start").read_text().strip() == "3"
    (disk,) = read_disks(str(root))
    assert not disk.partitions[0].aligned
    aligned = next(v for v in sc.vms if v.name == "aligned-01")
    (disk,) = read_disks(str(write_tree(aligned, tmp_path / "sys2")))
    assert disk.partitions[0].aligned and disk.partitions[0].start_bytes == 1024**2


def test_writer_stream_read_by_the_exporter_across_a_period_boundary(tmp_path):
    """The file the exporter follows: one record a second, replaced at the period boundary; the
    job's counters go on."""
    trace = compile_scenario(load_scenario("clean-oltp"))
    writer = GuestWriter(trace, tmp_path, vms=["oltp-01"], anchor=T0)
    paths = writer.setup()
    stream, sysfs = vm_paths(tmp_path, "oltp-01")
    assert paths["oltp-01"] == {
        "os": "linux",
        "load_generator": "fio",
        "stream": str(stream),
        "sysfs": str(sysfs),
        "procfs": str(stream.parent / "proc"),
        "udev": str(stream.parent / "udev"),
    }
    watcher = Watcher(WatchConfig(paths=[str(stream)]), clock=lambda: T0 + 600)
    collector = FioCollector(watcher, local_host="oltp-01", clock=lambda: T0 + 600)

    def ios() -> float:
        for fam in collector.collect():
            if fam.name == "fio_read_ios":
                return fam.samples[0].value
        raise AssertionError("no fio_read_ios_total")

    for T in range(T0 + 595, T0 + 600):
        writer.write(T)
    before = ios()
    lines_before = len(stream.read_text().splitlines())
    for T in range(T0 + 600, T0 + 605):
        writer.write(T)
    after = ios()
    assert lines_before == 5 and len(stream.read_text().splitlines()) == 5  # replaced at T0+600
    truth = trace.window("oltp-01/scsi0:1", end=4, seconds=5).read_ops  # records at 599 and 604
    assert abs((after - before) - truth) <= 1
    assert after > before


def guest_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ioparallax.simulators.guest.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_cli_writes_the_trees_and_a_record(tmp_path):
    manifest = tmp_path / "guests.json"
    proc = guest_cli("misaligned", "--dir", str(tmp_path), "--once", "--manifest", str(manifest))
    assert proc.returncode == 0, proc.stderr
    paths = json.loads(manifest.read_text())
    assert set(paths) == {"aligned-01", "misaligned-01"}
    rec = read_text(open(paths["misaligned-01"]["stream"]).read()).records
    assert len(rec) == 1 and rec[0].jobs[0].options["filename"] == "/dev/sdb"
    bad = guest_cli("misaligned", "--dir", str(tmp_path), "--vm", "nope", "--once")
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_ahv_guest_serial_carries_the_uuid_the_rules_read_out_of_it(tmp_path):
    import re

    from ioparallax.mixin.rules.exprs import AHV_SERIAL_RE
    from ioparallax.simulators.guest.sysfs import write_udev

    sc = load_scenario("clean-oltp-ahv")
    for vm in sc.vms:
        (got,) = read_disks(str(write_tree(vm, tmp_path / vm.name)))
        (d,) = vm.disks
        m = re.fullmatch(AHV_SERIAL_RE, got.serial)  # PromQL's label_replace anchors as fullmatch
        assert m and "-".join(m.groups()) == d.uuid == d.vdisk_uuid
        udev = write_udev(vm, tmp_path / f"{vm.name}-udev")
        (entry,) = udev.iterdir()
        lines = entry.read_text().splitlines()
        assert f"E:ID_SERIAL_SHORT={got.serial}" in lines and f"E:ID_SERIAL=1NUTANIX_{got.serial}" in lines
