"""Series per fio job with each collector switch, counted from the exposition of real fio 3.33 json+
results (the numbers in docs/fio.md, Series budget, and docs/metrics.md come from here)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.exporters.fio.conftest import run_fio, start_fio_exporter
from tests.support import promtool_check_metrics, venv_tool, wait_for_http

BUDGET_JOBS = """\
[global]
directory={dir}
size=4m
runtime=1
time_based
bs=4k
direct=1
[mixed]
rw=randrw
ioengine=psync
[trimmer]
rw=randtrim
ioengine=falloc
"""

SWITCHES = {
    "default": [],
    "no-percentiles": ["--no-collector.percentiles"],
    "no-histograms": ["--no-collector.histograms"],
    "no-trim": ["--no-collector.trim"],
    "all-off": ["--no-collector.percentiles", "--no-collector.histograms", "--no-collector.trim"],
}


@pytest.fixture(scope="module")
def budget_result(fio_work) -> Path:
    """json+: a randrw job (read and write timed, the common benchmark job) and a randtrim job
    (falloc punches holes: real trims on a plain file); direct=1, so no hygiene problem but the
    short runtime (left out by :func:`convert`'s scrape interval)."""
    (fio_work / "budget.fio").write_text(BUDGET_JOBS.format(dir=fio_work))
    out = fio_work / "budget.json"
    run_fio(["budget.fio", "--output-format=json+", f"--output={out}"], fio_work)
    jobs = {j["jobname"]: j for j in json.loads(out.read_text())["jobs"]}
    assert jobs["mixed"]["read"]["clat_ns"]["N"] > 0 and jobs["mixed"]["write"]["clat_ns"]["N"] > 0
    assert jobs["mixed"]["trim"]["total_ios"] == 0 and jobs["trimmer"]["trim"]["total_ios"] > 0
    return out


@pytest.fixture(scope="module")
def budget_stream(fio_work) -> Path:
    """The same randrw job streaming json+ status records (--status-interval=1), as Prometheus
    scrapes it while fio runs (fio-exporter run)."""
    out = fio_work / "budget-stream.json"
    run_fio(
        [
            "--name=mixed",
            f"--filename={fio_work / 'bs.dat'}",
            "--size=4m",
            "--rw=randrw",
            "--bs=4k",
            "--ioengine=psync",
            "--direct=1",
            "--runtime=3",
            "--time_based",
            "--output-format=json+",
            "--status-interval=1",
            f"--output={out}",
        ],
        fio_work,
    )
    return out


def convert(*args) -> str:
    """The exposition as Prometheus sees it while the jobs run: a long idle timeout keeps the run
    unfinished (a finished one adds fio_job_end_timestamp_seconds), a short scrape interval keeps
    the 1 s runtime from being a hygiene problem."""
    out = subprocess.run(
        [
            venv_tool("fio-exporter"),
            "convert",
            "--fio.idle-timeout",
            "1h",
            "--fio.scrape-interval",
            "100ms",
            *map(str, args),
        ],
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout.decode()


def per_job(text: str) -> dict[str, Counter]:
    """jobname -> Counter of sample names (series) of that job."""
    jobs: dict[str, Counter] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if "jobname" in s.labels:
                jobs.setdefault(s.labels["jobname"], Counter())[s.name] += 1
    return jobs


def family_count(c: Counter, part: str) -> int:
    return sum(n for name, n in c.items() if part in name)


def test_series_per_job_with_each_switch(budget_result, jsonplus_result, status_stream):
    counts = {}
    for case, flags in SWITCHES.items():
        text = convert(*flags, budget_result)
        assert promtool_check_metrics(text).returncode == 0, case
        counts[case] = per_job(text)
    mixed = {case: sum(c["mixed"].values()) for case, c in counts.items()}
    trimmer = {case: sum(c["trimmer"].values()) for case, c in counts.items()}
    print("series per job", {"randrw": mixed, "randtrim": trimmer})
    d = counts["default"]["mixed"]
    # a randrw job: no trim series (it never trims), 17 percentiles and 22 histogram series
    # (19 finite buckets, +Inf, _count, _sum) per timed direction
    assert family_count(d, "fio_trim_") == 0
    assert d["fio_read_clat_percentile_seconds"] == d["fio_write_clat_percentile_seconds"] == 17
    assert d["fio_read_clat_seconds_bucket"] == d["fio_write_clat_seconds_bucket"] == 20
    assert mixed["default"] - mixed["no-percentiles"] == 2 * 17
    assert mixed["default"] - mixed["no-histograms"] == 2 * 19
    assert mixed["no-trim"] == mixed["default"]
    assert mixed["all-off"] == mixed["default"] - 2 * 17 - 2 * 19
    # histograms off keeps +Inf, _count and _sum: the op-weighted mean latency rules still work
    off = counts["no-histograms"]["mixed"]
    assert off["fio_read_clat_seconds_bucket"] == 1 and off["fio_read_clat_seconds_count"] == 1
    assert off["fio_read_clat_seconds_sum"] == 1 and off["fio_read_clat_percentile_seconds"] == 17
    # the trim job keeps its trim direction (timed) unless trim is switched off; its read and
    # write blocks (all zeros, untimed) are 6 series each
    t = counts["default"]["trimmer"]
    assert t["fio_trim_ios_total"] == 1 and t["fio_trim_clat_percentile_seconds"] == 17
    assert family_count(counts["no-trim"]["trimmer"], "fio_trim_") == 0
    assert trimmer["default"] - trimmer["no-trim"] == family_count(t, "fio_trim_")
    assert family_count(t, "fio_read_") == family_count(t, "fio_write_") == 6
    # the jobs of the session's json+ result (randread x2, write) trim nothing: no trim series
    plain = per_job(convert(jsonplus_result))
    assert plain and all(family_count(c, "fio_trim_") == 0 for c in plain.values())
    # a status stream (--status-interval) adds interval IOPS and bandwidth per direction shown and
    # the interval mean latency per timed one (randread: read 3, write 2)
    st = per_job(convert(status_stream))["st"]
    assert family_count(st, "fio_read_interval_") == 3 and family_count(st, "fio_write_interval_") == 2
    print("status stream job", sum(st.values()), "eta", st["fio_job_eta_seconds"])
    # the numbers in docs/fio.md and docs/metrics.md
    assert mixed == {
        "default": EXPECTED_RANDRW,
        "no-percentiles": EXPECTED_RANDRW - 34,
        "no-histograms": EXPECTED_RANDRW - 38,
        "no-trim": EXPECTED_RANDRW,
        "all-off": EXPECTED_RANDRW - 72,
    }


def test_series_per_streaming_job(budget_stream):
    """The per-job figure of docs/metrics.md: a randrw job while fio streams status records."""
    default = per_job(convert(budget_stream))["mixed"]
    off = per_job(convert(*SWITCHES["all-off"], budget_stream))["mixed"]
    print("streaming randrw job", sum(default.values()), sum(off.values()))
    # interval IOPS, bandwidth and mean latency per timed direction, and fio's eta
    assert family_count(default, "_interval_") == 6 and default["fio_job_eta_seconds"] == 1
    assert sum(default.values()) == EXPECTED_RANDRW + 7 == 121
    assert sum(off.values()) == EXPECTED_RANDRW - 72 + 7 == 49


EXPECTED_RANDRW = 114  # 18 job-level + 2 x 48 (read, write); breakdown in docs/fio.md


def test_switches_from_the_config_file(budget_result, tmp_path):
    cfg = tmp_path / "fio.yml"
    cfg.write_text("percentiles: false\nhistograms: false\ntrim: false\n")
    by_file = per_job(convert("--config.file", cfg, budget_result))
    assert by_file == per_job(convert(*SWITCHES["all-off"], budget_result))
    # a flag wins over the file
    back = per_job(convert("--config.file", cfg, "--collector.trim", budget_result))
    assert family_count(back["trimmer"], "fio_trim_ios_total") == 1
    assert family_count(back["mixed"], "percentile") == 0
    cfg.write_text("trim: sometimes\n")
    out = subprocess.run(
        [venv_tool("fio-exporter"), "convert", "--config.file", cfg, budget_result], capture_output=True, timeout=60
    )
    assert out.returncode == 2 and f"{cfg}: trim" in out.stderr.decode()


def test_serve_with_switches_off(budget_result, tmp_path, processes):
    """serve takes the same switches, logs them at start-up, and the mean latency still comes
    from _sum and _count."""
    port, proc = start_fio_exporter(
        processes, "serve", "--fio.watch", budget_result, "--no-collector.guest-disk", *SWITCHES["all-off"]
    )
    wait_for_http(f"http://127.0.0.1:{port}/", proc=proc)
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert "collectors switched off: percentiles, histograms, trim" in proc.output()
    jobs = per_job(text)
    assert family_count(jobs["mixed"], "percentile") == 0 and family_count(jobs["trimmer"], "fio_trim_") == 0
    doc = {j["jobname"]: j for j in json.loads(budget_result.read_text())["jobs"]}["mixed"]["read"]["clat_ns"]
    fam = {f.name: f for f in text_string_to_metric_families(text)}["fio_read_clat_seconds"]
    got = {s.name: s.value for s in fam.samples if s.labels["jobname"] == "mixed"}
    assert got["fio_read_clat_seconds_count"] == doc["N"]
    assert got["fio_read_clat_seconds_sum"] == pytest.approx(doc["mean"] * doc["N"] / 1e9)
    assert [s.labels["le"] for s in fam.samples if s.name.endswith("_bucket") and s.labels["jobname"] == "mixed"] == [
        "+Inf"
    ]
