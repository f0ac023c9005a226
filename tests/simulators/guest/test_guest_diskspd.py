"""DiskSPD results of the simulated Windows guests: runs back to back, one -Rxml document per
finished run, read back by the diskspd exporter's own reader to the trace's numbers."""

import math

import pytest

from ioparallax.exporters.diskspd.parse import parse_bytes, targets_of
from ioparallax.simulators.guest.diskspd import KEEP, GuestDiskspd
from ioparallax.simulators.guest.writer import GuestWriter
from ioparallax.simulators.scenario import compile_scenario, load_scenario
from tests.support import scenario_data, scenario_trace, venv_tool

T0 = 1_800_000_000  # a multiple of 600: the period starts here


@pytest.fixture(scope="module")
def trace():
    return compile_scenario(load_scenario("diskspd-zero-read"))


def test_runs_are_back_to_back_from_the_guest_boot(trace):
    sim = GuestDiskspd(trace, anchor=T0)
    # 5 s warm-up + 60 s measured: runs start at T0, T0+65, T0+130...
    assert sim.runs_ended("winbench-01", T0, T0 + 64) == []
    assert sim.runs_ended("winbench-01", T0, T0 + 65) == [T0]
    assert sim.runs_ended("winbench-01", T0 + 65, T0 + 200) == [T0 + 65, T0 + 130]


def test_a_document_reads_back_to_the_trace(trace):
    sim = GuestDiskspd(trace, anchor=T0)
    start = T0 + 65
    r = parse_bytes(sim.document("winbench-01", start).encode())
    assert (r.computer_name, r.version, r.run_time) == ("WINBENCH01", "2.2.0", float(start))
    prof, span = r.profiles[0], r.spans[0]
    assert (prof.warmup_s, prof.duration_s, prof.measure_latency, prof.io_bucket_duration_ms) == (5, 60, True, 1000)
    (t,) = targets_of(prof, span)
    disk = trace.scenario.vms[0].disks[0]
    # measured seconds start after the warm-up: period seconds 70..129
    truth = trace.window(disk, end=(start + 65) % 600, seconds=60)
    assert t.read_count == math.floor(truth.read_ops) and t.write_count == math.floor(truth.write_ops)
    assert t.read_bytes == pytest.approx(truth.read_bytes, abs=1)
    assert t.latency.read_avg_ms == pytest.approx(1000 * truth.read_latency_s, abs=5e-4)
    assert t.path == "D:\\diskspd\\testfile.dat"
    assert (t.profile.block_size, t.profile.write_ratio, t.profile.request_count) == (8192, 40, 4)
    assert t.profile.write_pattern == "sequential" and t.profile.disable_os_cache and t.profile.write_through
    assert t.profile.random_fraction == 1.0 and t.profile.file_size == 100 * 1024**3
    assert len(t.iops.buckets) == 60 and t.iops.buckets[0].read == pytest.approx(6000, abs=0.5)
    # percentiles: min < median < p99 < max, the median of a log-normal below its mean
    pct = {p.percentile: p for p in span.latency_percentiles}
    assert pct[0].read_ms < pct[50].read_ms < 0.3 < pct[99].read_ms < pct[100].read_ms


def test_threads_share_the_target(trace):
    data = scenario_data(
        {
            "name": "w1",
            "guest_os": "windows",
            "load_generator": "diskspd",
            "disks": [
                {
                    "streams": [
                        {
                            "read_iops": 1000,
                            "iodepth": 8,
                            "size": "64KiB",
                            "random": 0,
                            "diskspd": {"threads": 4, "run": "10s", "warmup": 0, "write_buffer": "zero"},
                        }
                    ]
                }
            ],
        },
        name="threads",
    )
    sim = GuestDiskspd(scenario_trace(data), anchor=T0)
    r = parse_bytes(sim.document("w1", T0).encode())
    assert len(r.spans[0].threads) == 4
    (t,) = targets_of(r.profiles[0], r.spans[0])
    assert (t.threads, t.read_count, t.profile.request_count, t.profile.write_pattern) == (4, 10000, 2, "zero")
    assert t.profile.access == "sequential" and t.profile.stride_size == 65536


def test_writer_keeps_the_newest_runs_and_skips_a_backlog(tmp_path, trace):
    writer = GuestWriter(trace, tmp_path, anchor=T0)
    writer.setup()
    writer.write(T0 + 10)
    results = tmp_path / "diskspd"
    assert list(results.iterdir()) == []
    writer.write(T0 + 65)  # run 1 ended
    assert sorted(p.name for p in results.iterdir()) == [
        "WINBENCH01-1800000000.xml",
        "WINBENCH02-1800000000.xml",
        "WINLEGACY01-1800000000.xml",
    ]
    writer.write(T0 + 65 * 20)  # suspended for 19 runs: the newest KEEP are written, not 19
    mine = sorted(results.glob("WINBENCH01-*.xml"))
    assert len(mine) == KEEP and mine[-1].name == f"WINBENCH01-{T0 + 65 * 19}.xml"
    assert not list(results.glob("*.part"))


def test_the_diskspd_exporter_reads_the_documents(tmp_path, trace):
    import subprocess

    writer = GuestWriter(trace, tmp_path, anchor=T0, vms=["winbench-02"])
    writer.setup()
    writer.write(T0 + 65)
    (doc,) = (tmp_path / "diskspd").iterdir()
    out = subprocess.run(
        [venv_tool("diskspd-exporter"), "convert", str(doc)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert 'diskspd_read_iops{host="WINBENCH02"' in out.stdout
    assert 'problem="reads_unwritten_file"' in out.stdout  # -c created the 100 GiB file, never written
    assert 'diskspd_target_hygiene_cannot_tell{host="WINBENCH02",problem="default_write_pattern"' in out.stdout
