"""The Windows guest OS view: windows_exporter-shaped disk metrics computed from the trace, served
by the real node_exporter's textfile collector as the stack does."""

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from ioparallax.simulators.guest.windows import GuestWindows, disk_number
from ioparallax.simulators.guest.writer import GuestWriter
from tests.support import ManagedProcess, free_port, promtool_check_metrics, require_tool, scenario_trace, wait_for_http

T0 = 1_700_000_400  # a multiple of the 60 s period: the guest "booted" at T0

SCENARIO = {
    "name": "win",
    "period": "60s",
    "cluster": {"cvms": ["cvm-1"]},
    "vms": [
        {
            "name": "sql-01",
            "guest_os": "windows",
            "load_generator": "diskspd",
            "hostname": "SQL-01",
            "disks": [
                {
                    "streams": [
                        {
                            "read_iops": 3000,
                            "write_iops": 1000,
                            "size": "8KiB",
                            "read_latency": "400us",
                            "write_latency": "1ms",
                            "to": "40s",
                        }
                    ]
                },
                {
                    "partition_start": 32256,  # Windows 2003: 63 sectors, not on the 4 KiB grid
                    "streams": [{"write_iops": 100, "size": "1MiB", "write_latency": "20ms"}],
                },
            ],
        },
        {"name": "linux-01", "disks": [{"streams": [{"read_iops": 10}]}]},
    ],
}


@pytest.fixture(scope="module")
def trace():
    return scenario_trace(SCENARIO)


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_counters_are_the_trace_over_any_stretch(trace):
    win = GuestWindows(trace, anchor=T0)
    d1, d2 = trace.scenario.vms[0].disks
    a, b = win.counters(d1, T0 + 10), win.counters(d1, T0 + 30)
    truth = trace.window(d1, end=30, seconds=20)
    assert b["reads_total"] - a["reads_total"] == pytest.approx(truth.read_ops, abs=1)
    assert b["write_bytes_total"] - a["write_bytes_total"] == pytest.approx(truth.write_bytes, abs=1)
    # op-weighted mean latency: rate(latency) / rate(ops), as the rules compute it
    mean = (b["read_latency_seconds_total"] - a["read_latency_seconds_total"]) / (b["reads_total"] - a["reads_total"])
    assert mean == pytest.approx(0.0004, rel=1e-3)
    assert b["read_seconds_total"] == b["read_latency_seconds_total"]
    # 3000 x 0.4 ms + 1000 x 1 ms = 2.2 requests in flight: busy all the time, never idle
    assert b["idle_seconds_total"] - a["idle_seconds_total"] == 0
    assert b["requests_queued"] == 2
    # after the stream stops at 40 s the disk idles
    c, d = win.counters(d1, T0 + 45), win.counters(d1, T0 + 55)
    assert d["reads_total"] == c["reads_total"] and d["idle_seconds_total"] - c["idle_seconds_total"] == 10
    assert d["requests_queued"] == 0
    # next period: counters go on from where they were
    assert win.counters(d1, T0 + 90)["reads_total"] > d["reads_total"]


def test_1mib_io_counts_once_and_split_ios_rise_only_on_a_misaligned_partition(trace):
    win = GuestWindows(trace, anchor=T0)
    d1, d2 = trace.scenario.vms[0].disks
    assert d1.aligned and not d2.aligned
    a, b = win.counters(d2, T0 + 10), win.counters(d2, T0 + 20)
    assert b["writes_total"] - a["writes_total"] == pytest.approx(1000, abs=1)  # 100/s of 1 MiB, not split in two
    assert b["split_ios_total"] - a["split_ios_total"] == pytest.approx(1000, abs=1)
    assert win.counters(d1, T0 + 20)["split_ios_total"] == 0


def test_exposition_has_windows_exporter_names_labels_and_types(trace):
    text = GuestWindows(trace, anchor=T0).text("sql-01", T0 + 30)
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    for kind, label in (("physical_disk", "disk"), ("logical_disk", "volume")):
        for name in (
            "reads",
            "writes",
            "read_bytes",
            "write_bytes",
            "read_seconds",
            "write_seconds",
            "read_latency_seconds",
            "write_latency_seconds",
            "split_ios",
            "idle_seconds",
        ):
            fam = fams[f"windows_{kind}_{name}"]
            assert fam.type == "counter", fam.name
            assert {s.labels[label] for s in fam.samples} == (
                {"0", "1", "2"} if label == "disk" else {"C:", "D:", "E:"}
            )
        assert fams[f"windows_{kind}_requests_queued"].type == "gauge"
    s = samples(text)
    info = {dict(k)["volume"]: dict(k) for (n, k) in s if n == "windows_logical_disk_info"}
    assert info["E:"] == {
        "disk": "2",
        "filesystem": "NTFS",
        "serial_number": info["E:"]["serial_number"],
        "type": "fixed",
        "volume": "E:",
        "volume_name": "data2",
    }
    assert len(info["E:"]["serial_number"]) == 8 and info["C:"]["disk"] == "0"
    assert s[("windows_os_hostname", (("domain", ""), ("fqdn", "SQL-01"), ("hostname", "SQL-01")))] == 1
    assert s[("windows_logical_disk_size_bytes", (("volume", "D:"),))] == 100 * 1024**3 - 1024**2
    # the physical disk and its volume count the same I/O
    d = disk_number(trace.scenario.vms[0].disks[0])
    assert (
        s[("windows_physical_disk_reads_total", (("disk", str(d)),))]
        == s[("windows_logical_disk_reads_total", (("volume", "D:"),))]
        > 0
    )
    assert promtool_check_metrics(text).returncode == 0


def test_writer_keeps_linux_and_windows_apart(tmp_path, trace):
    writer = GuestWriter(trace, tmp_path, anchor=T0)
    paths = writer.setup()
    assert paths["sql-01"] == {
        "os": "windows",
        "load_generator": "diskspd",
        "windows": str(tmp_path / "sql-01" / "windows"),
        "diskspd": str(tmp_path / "diskspd"),
    }
    assert set(paths["linux-01"]) == {"os", "load_generator", "stream", "sysfs", "procfs", "udev"}
    writer.write(T0 + 5)
    assert (tmp_path / "sql-01" / "windows" / "windows_exporter.prom").is_file()
    assert not (tmp_path / "sql-01" / "proc").exists() and not (tmp_path / "sql-01" / "fio-status.json").exists()
    assert (tmp_path / "linux-01" / "proc" / "diskstats").is_file()


def test_node_exporter_textfile_collector_serves_it(tmp_path, trace):
    require_tool("prometheus-node-exporter")
    writer = GuestWriter(trace, tmp_path, vms=["sql-01"], anchor=T0)
    where = writer.setup()["sql-01"]
    writer.write(T0 + 30)
    port = free_port()
    proc = ManagedProcess(
        "windows-textfile",
        [
            "prometheus-node-exporter",
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={where['windows']}",
        ],
        tmp_path,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/metrics", proc=proc)
        served = samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
    finally:
        proc.stop()
    written = samples((tmp_path / "sql-01" / "windows" / "windows_exporter.prom").read_text())
    assert served[("node_textfile_scrape_error", ())] == 0
    assert {k: v for k, v in served.items() if k[0].startswith("windows_")} == written
