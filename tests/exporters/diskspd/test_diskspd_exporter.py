"""diskspd-exporter's exposition: values against the documents, promtool-clean, hygiene findings,
retention, and a real exporter process over HTTP (landing page, /metrics, basic auth, --version)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import bcrypt
import pytest
import requests

from ioparallax.exporters.diskspd.collector import Collectors, DiskspdCollector
from ioparallax.exporters.diskspd.hygiene import HygieneConfig
from ioparallax.exporters.diskspd.parse import parse_bytes, targets_of
from ioparallax.exporters.diskspd.reader import ResultFiles, WatchConfig
from tests.support import (
    exposition_of,
    free_port,
    has,
    promtool_check_metrics,
    samples,
    value,
    venv_tool,
    wait_for_http,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RUN_END = 1795165200.0 + 30 + 60 + 5  # the OLTP fixture: RunTime + warm-up + test + cool-down


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def files_for(*paths, clock=None, **kw) -> ResultFiles:
    kw.setdefault("retention_s", 0.0)
    return ResultFiles(WatchConfig(paths=[str(p) for p in paths], **kw), clock=clock or time.time)


def exposition(files: ResultFiles, **kw) -> str:
    return exposition_of(DiskspdCollector(files, **kw))


@pytest.fixture()
def results(tmp_path) -> Path:
    d = tmp_path / "results"
    d.mkdir()
    for f in FIXTURES.glob("*.xml"):
        shutil.copy(f, d / f.name)
    return d


def test_every_fixture_exposes_its_totals_and_promtool_accepts_it(results):
    text = exposition(files_for(results))
    check = promtool_check_metrics(text)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
    sm = samples(text)
    assert value(sm, "diskspd_up") == 1.0
    for f in FIXTURES.glob("*.xml"):
        r = parse_bytes(f.read_bytes())
        src = str(results / f.name)
        assert value(sm, "diskspd_source_up", source=src) == 1.0
        for i, (prof, span) in enumerate(zip(r.profiles, r.spans)):
            for t in targets_of(prof, span):
                labels = dict(source=src, timespan=i + 1, target_id=t.index)
                assert value(sm, "diskspd_read_ios_total", **labels) == t.read_count
                assert value(sm, "diskspd_write_bytes_total", **labels) == t.write_bytes
                assert value(sm, "diskspd_target_outstanding_ios", **labels) == t.profile.request_count * t.threads
                assert value(sm, "diskspd_read_iops", **labels) == pytest.approx(t.read_count / span.test_time_s)


def test_oltp_run_values(results):
    sm = samples(exposition(files_for(results / "vm-oltp-sh-z10m-utf16.xml")))
    t = dict(host="SQLVM01", timespan=1, target_id=0, target="D:\\diskspd\\oltp.dat")
    assert value(sm, "diskspd_run_start_timestamp_seconds", host="SQLVM01") == 1795165200.0
    assert value(sm, "diskspd_run_info", host="SQLVM01", version="2.2.0") == 1.0
    assert value(sm, "diskspd_target_info", access="random", write_buffer="random", os_cache="off", **t) == 1.0
    assert value(sm, "diskspd_target_block_size_bytes", **t) == 8192
    assert value(sm, "diskspd_target_outstanding_ios", **t) == 32  # -o8 x -t4
    assert value(sm, "diskspd_target_write_ratio", **t) == 0.3
    assert value(sm, "diskspd_target_random_ratio", **t) == 1.0
    assert value(sm, "diskspd_read_latency_mean_seconds", **t) == 0.00092
    assert value(sm, "diskspd_write_latency_mean_seconds", **t) == 0.00185
    reads = value(sm, "diskspd_read_ios_total", **t)
    assert value(sm, "diskspd_read_latency_seconds_total", **t) == pytest.approx(0.00092 * reads)
    assert value(sm, "diskspd_timespan_warmup_seconds", host="SQLVM01") == 30
    assert value(sm, "diskspd_timespan_cpu_ratio", mode="kernel") == pytest.approx(0.153)
    # the 15 percentiles of DiskSPD's text report by default, min and max included
    pct = {dict(ls)["percentile"] for (n, ls) in sm if n == "diskspd_read_latency_percentile_seconds"}
    assert pct == {"0", "25", "50", "75", "90", "95", "99", "99.9", "99.99", "99.999", "99.9999"} | {
        "99.99999",
        "99.999999",
        "99.9999999",
        "100",
    }
    assert not has(sm, "diskspd_target_hygiene_problem")  # done right
    assert not has(sm, "diskspd_target_hygiene_cannot_tell")


def test_all_percentiles_on_request(results):
    sm = samples(
        exposition(files_for(results / "vm-oltp-sh-z10m-utf16.xml"), collectors=Collectors(all_percentiles=True))
    )
    assert sum(1 for (n, _) in sm if n == "diskspd_write_latency_percentile_seconds") == 108
    assert value(sm, "diskspd_latency_percentile_seconds", percentile="37") > 0


def test_seed_run_hygiene_findings(results):
    text = exposition(
        files_for(results / "vm-seed-default-pattern.xml"),
        hygiene=HygieneConfig(cache_size_bytes=32 * 2**30, scrape_interval_s=15),
    )
    sm = samples(text)
    traps = {dict(ls)["problem"] for (n, ls) in sm if n == "diskspd_target_hygiene_problem"}
    assert traps == {"reads_unwritten_file", "buffered_io", "working_set_below_cache", "no_warmup", "short_runtime"}
    # a "sequential" pattern in the XML is DiskSPD's default or -Zr: not told, not passed as OK
    unknown = {dict(ls)["problem"] for (n, ls) in sm if n == "diskspd_target_hygiene_cannot_tell"}
    assert unknown == {"default_write_pattern"}
    assert value(sm, "diskspd_target_info", write_buffer="sequential", os_cache="on") == 1.0


def test_zero_buffers_trap_from_the_xml(results, tmp_path):
    text = (results / "vm-oltp-sh-z10m-utf16.xml").read_bytes().decode("utf-16")
    zero = text.replace("<Pattern>random</Pattern>", "<Pattern>zero</Pattern>")
    f = tmp_path / "zero.xml"
    f.write_text(zero.lstrip("\ufeff"))
    sm = samples(exposition(files_for(f)))
    assert value(sm, "diskspd_target_hygiene_problem", problem="zero_buffers") == 1.0


def test_two_targets_with_one_path_are_two_series(results):
    sm = samples(exposition(files_for(results / "vm-two-targets-same-disk.xml")))
    assert value(sm, "diskspd_target_block_size_bytes", target="#1", target_id=0) == 8192
    assert value(sm, "diskspd_target_block_size_bytes", target="#1", target_id=1) == 32768
    assert value(sm, "diskspd_read_ios_total", target_id=1) == 0


def test_retention_hides_an_old_run_but_not_its_health(results):
    f = results / "vm-oltp-sh-z10m-utf16.xml"
    import os

    os.utime(f, (RUN_END, RUN_END))
    files = files_for(f, clock=Clock(RUN_END + 3599), retention_s=3600)
    assert has(samples(exposition(files)), "diskspd_read_ios_total")
    files.clock = Clock(RUN_END + 3601)
    sm = samples(exposition(files))
    assert not has(sm, "diskspd_read_ios_total") and value(sm, "diskspd_source_up", source=str(f)) == 1.0


def test_unchanged_file_is_not_parsed_again(results, monkeypatch):
    from ioparallax.exporters.diskspd import reader as files_module

    calls = []
    real = files_module.parse_bytes
    monkeypatch.setattr(files_module, "parse_bytes", lambda *a, **k: calls.append(1) or real(*a, **k))
    files = files_for(results / "vm-seed-default-pattern.xml")
    exposition(files)
    exposition(files)
    assert len(calls) == 1
    (results / "vm-seed-default-pattern.xml").write_bytes((FIXTURES / "vm-oltp-sh-z10m-utf16.xml").read_bytes())
    sm = samples(exposition(files))
    assert len(calls) == 2 and has(sm, "diskspd_run_info", host="SQLVM01")


# ---------------------------------------------------------------------------------------------
# a real process


def test_real_exporter_over_http_with_basic_auth(results, processes, tmp_path):
    web = tmp_path / "web.yml"
    web.write_text(f"basic_auth_users:\n  prometheus: '{bcrypt.hashpw(b'pw', bcrypt.gensalt(4)).decode()}'\n")
    port = free_port()
    processes.start(
        "diskspd-exporter",
        [venv_tool("diskspd-exporter"), f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={web}"]
        + ["--diskspd.watch", str(results), "--diskspd.cache-size=32GiB"],
    )
    base = f"http://127.0.0.1:{port}"
    wait_for_http(f"{base}/-/healthy", status=401)  # basic auth guards every route
    assert requests.get(f"{base}/metrics", timeout=10).status_code == 401
    landing = requests.get(f"{base}/", auth=("prometheus", "pw"), timeout=10)
    assert "diskspd-exporter" in landing.text and "cache_size: 34359738368" in landing.text
    body = requests.get(f"{base}/metrics", auth=("prometheus", "pw"), timeout=10).text
    sm = samples(body)
    assert value(sm, "diskspd_up") == 1.0
    assert has(sm, "diskspd_exporter_build_info")
    assert has(sm, "process_cpu_seconds_total")
    assert value(sm, "diskspd_target_hygiene_problem", host="WINVM-07", problem="working_set_below_cache") == 1.0


def test_version_and_help():
    out = subprocess.run([venv_tool("diskspd-exporter"), "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "diskspd-exporter" in out.stdout
    out = subprocess.run([venv_tool("diskspd-exporter"), "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "--diskspd.watch" in out.stdout and "--web.config.file" in out.stdout


def test_bad_flag_value_is_one_line_naming_the_flag():
    out = subprocess.run(
        [venv_tool("diskspd-exporter"), "--diskspd.cache-size=lots", "--diskspd.watch=/tmp"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and "--diskspd.cache-size" in out.stderr and "Traceback" not in out.stderr
