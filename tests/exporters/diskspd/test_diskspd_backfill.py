"""The -D per-interval series with the run's own timestamps: through real promtool into TSDB
blocks (read back with `promtool tsdb dump`), and through a real VictoriaMetrics import."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import requests

from ioparallax.exporters.diskspd.backfill import interval_samples, render
from ioparallax.exporters.diskspd.parse import parse_bytes, targets_of
from tests.exporters.diskspd.test_diskspd_exporter import FIXTURES
from tests.support import backfill_dump, dumped_series, free_port, require_tool, venv_tool, wait_for_http

OLTP = FIXTURES / "vm-oltp-sh-z10m-utf16.xml"
START = 1795165200.0 + 30  # RunTime + Warmup: the measurement's start


def test_bucket_times_and_values():
    r = parse_bytes(OLTP.read_bytes())
    samples = list(interval_samples(r, "oltp.xml"))
    reads = [s for s in samples if s.name == "diskspd_interval_read_iops"]
    assert [s.timestamp_s - START for s in reads] == [5.0 * i for i in range(1, 13)]
    (t,) = targets_of(r.profiles[0], r.spans[0])
    assert [s.value for s in reads] == [b.read for b in t.iops.buckets]
    assert reads[0].labels == ["SQLVM01", "oltp.xml", "1", "0", "D:\\diskspd\\oltp.dat"]
    lat = [s for s in samples if s.name == "diskspd_interval_write_latency_mean_seconds"]
    assert len(lat) == 12 and all(0.0015 < s.value < 0.0022 for s in lat)


def test_no_runtime_no_backfill():
    text = OLTP.read_bytes().decode("utf-16").replace("2026/11/20 09:00:00 UTC", "")
    with pytest.raises(ValueError, match="RunTime is empty"):
        list(interval_samples(parse_bytes(text.encode()), "x"))


def test_promtool_creates_blocks_with_the_runs_timestamps(tmp_path):
    dump = backfill_dump("diskspd-exporter", [OLTP, FIXTURES / "vm-two-targets-same-disk.xml"], tmp_path)
    oltp = dumped_series(dump, "diskspd_interval_read_iops", 'host="SQLVM01"')
    r = parse_bytes(OLTP.read_bytes())
    (t,) = targets_of(r.profiles[0], r.spans[0])
    assert oltp == [(int((START + 5 * i) * 1000), b.read) for i, b in enumerate(t.iops.buckets, 1)]
    # the raw-disk run's two targets on the same path stay two series
    rows = [line for line in dump.splitlines() if "diskspd_interval_read_iops" in line and 'host="S2D-N1-VM03"' in line]
    two = {m.group(1) for line in rows if (m := re.search(r'target_id="(\d+)"', line))}
    assert two == {"0", "1"}


def test_prometheus_serves_the_backfilled_blocks(tmp_path, processes):
    require_tool("prometheus")
    data = tmp_path / "data"
    om = tmp_path / "run.om"
    out = subprocess.run(
        [venv_tool("diskspd-exporter"), "backfill", "--output", str(om), "--tsdb", str(data), str(OLTP)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 15s\n")
    port = free_port()
    p = processes.start(
        "prometheus",
        [
            require_tool("prometheus"),
            f"--config.file={cfg}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        + ["--storage.tsdb.retention.time=100y"],
    )
    base = f"http://127.0.0.1:{port}"
    wait_for_http(f"{base}/-/ready", proc=p, status=200, timeout=60)
    answer = requests.get(
        f"{base}/api/v1/query_range",
        params={"query": 'diskspd_interval_read_iops{host="SQLVM01"}', "start": START, "end": START + 60, "step": 5},
        timeout=30,
    ).json()
    (series,) = answer["data"]["result"]
    r = parse_bytes(OLTP.read_bytes())
    (t,) = targets_of(r.profiles[0], r.spans[0])
    got = {float(ts): float(v) for ts, v in series["values"]}
    assert [got[START + 5 * i] for i in range(1, 13)] == [b.read for b in t.iops.buckets]


def test_victoriametrics_import_of_the_prometheus_format(tmp_path, processes):
    require_tool("victoria-metrics")
    port = free_port()
    p = processes.start(
        "victoria-metrics",
        [
            "victoria-metrics",
            f"-httpListenAddr=127.0.0.1:{port}",
            f"-storageDataPath={tmp_path / 'vm'}",
            "-retentionPeriod=100y",
        ],
    )
    base = f"http://127.0.0.1:{port}"
    wait_for_http(f"{base}/health", proc=p)
    r = parse_bytes(OLTP.read_bytes())
    body = render(list(interval_samples(r, "oltp.xml")), "prometheus")
    assert requests.post(f"{base}/api/v1/import/prometheus", data=body.encode(), timeout=30).status_code == 204
    requests.get(f"{base}/internal/force_flush", timeout=30)
    exported = requests.get(
        f"{base}/api/v1/export", params={"match[]": 'diskspd_interval_read_iops{host="SQLVM01"}'}, timeout=30
    )
    (series,) = [json.loads(line) for line in exported.text.splitlines()]
    (t,) = targets_of(r.profiles[0], r.spans[0])
    assert series["values"] == [b.read for b in t.iops.buckets]
    assert series["timestamps"] == [int((START + 5 * i) * 1000) for i in range(1, 13)]
