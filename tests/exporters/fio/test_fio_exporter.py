"""The exporter on real fio output: values against fio's own JSON, live streams, retention, CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

from ioparallax.exporters.fio.collector import FioCollector
from ioparallax.exporters.fio.histogram import LATENCY_EDGES_SECONDS
from ioparallax.exporters.fio.reader import FileTailer, WatchConfig, Watcher
from tests.exporters.fio.conftest import decode_all, start_fio_exporter
from tests.support import (
    exposition_of,
    fio_job_args,
    first_scrape,
    free_port,
    has,
    promtool_check_metrics,
    run_entry_point,
    samples,
    value,
    venv_tool,
    wait_for_http,
)


class Clock:
    def __init__(self, offset: float = 0.0):
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


def exposition(watcher: Watcher, **kw) -> str:
    return exposition_of(FioCollector(watcher, local_host="guest1", clock=watcher.clock, **kw))


def watcher_for(*paths, clock=None, **kw) -> Watcher:
    return Watcher(WatchConfig(paths=[str(p) for p in paths], **kw), clock=clock or Clock())


# ---------------------------------------------------------------------------------------------
# values against fio's own JSON


def test_jsonplus_values_match_fio(jsonplus_result):
    raw = json.loads(jsonplus_result.read_text())
    # a minute later: the file has stopped growing, so the run is finished
    text = exposition(watcher_for(jsonplus_result, clock=Clock(60)))
    sm = samples(text)
    src = str(jsonplus_result)
    assert value(sm, "fio_up") == 1
    for pos, rj in enumerate(raw["jobs"]):
        lab = dict(jobname=rj["jobname"], jobid=pos, host="guest1", source=src)
        info = value(
            sm,
            "fio_job_info",
            **lab,
            rw=rj["job options"]["rw"],
            direct="1",
            ioengine="libaio",
            bs=rj["job options"]["bs"],
        )
        assert info == 1
        # the job's iodepth as a number (fio prints the option as a string; absent means 1)
        assert value(sm, "fio_job_iodepth", **lab) == int(rj["job options"].get("iodepth", "1"))
        for d in ("read", "write"):
            r = rj[d]
            assert value(sm, f"fio_{d}_ios_total", **lab) == r["total_ios"]
            assert value(sm, f"fio_{d}_bytes_total", **lab) == r["io_bytes"]
            assert value(sm, f"fio_{d}_iops", **lab) == pytest.approx(r["iops"])
            assert value(sm, f"fio_{d}_bandwidth_bytes_per_second", **lab) == r["bw_bytes"]
            clat = r["clat_ns"]
            if clat["N"] == 0:
                assert not has(sm, f"fio_{d}_clat_seconds_count", **lab)  # absent, not zero
                continue
            # a real histogram: _count is fio's N, buckets are monotonic, edges as documented
            assert value(sm, f"fio_{d}_clat_seconds_count", **lab) == clat["N"]
            assert value(sm, f"fio_{d}_clat_seconds_sum", **lab) == pytest.approx(clat["mean"] * clat["N"] / 1e9)
            buckets = [
                (float(le), value(sm, f"fio_{d}_clat_seconds_bucket", **lab, le=le))
                for le in [repr(e) for e in LATENCY_EDGES_SECONDS] + ["+Inf"]
            ]
            counts = [c for _, c in buckets]
            assert counts == sorted(counts) and counts[-1] == clat["N"]
            # every one of fio's exact percentiles lies in the bucket the histogram puts it in
            # (bins are ~1 % wide: a value near an edge may sit in the neighbouring bucket)
            for key, ns in clat["percentile"].items():
                q = float(key) / 100
                v = ns / 1e9
                assert value(
                    sm, f"fio_{d}_clat_percentile_seconds", **lab, percentile=f"{float(key):g}"
                ) == pytest.approx(v)
                i = next(i for i, c in enumerate(counts) if c >= q * clat["N"])
                upper = buckets[i][0]
                lower = buckets[i - 1][0] if i > 0 else 0.0
                assert lower * 0.98 <= v <= upper * 1.02, (key, v, lower, upper)
        assert value(sm, "fio_job_runtime_seconds_total", **lab) == rj["job_runtime"] / 1000
        assert value(sm, "fio_job_cpu_system_ratio", **lab) == pytest.approx(rj["sys_cpu"] / 100)
        assert value(
            sm, "fio_job_iodepth_level_ratio", **lab, depth="4" if rj["jobname"] == "rr" else "1"
        ) == pytest.approx(rj["iodepth_level"]["4" if rj["jobname"] == "rr" else "1"] / 100)
        assert value(sm, "fio_job_finished", **lab) == 1
        assert value(sm, "fio_job_end_timestamp_seconds", **lab) == raw["timestamp_ms"] / 1000
    res = promtool_check_metrics(text)
    assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()


def test_every_form_passes_promtool(
    jsonplus_result, plain_json_result, status_stream, unified_gtod_result, stdout_with_note, client_results
):
    paths = [
        jsonplus_result,
        plain_json_result,
        status_stream,
        unified_gtod_result,
        stdout_with_note,
        client_results["final"],
        client_results["interim"],
    ]
    text = exposition(watcher_for(*paths))
    res = promtool_check_metrics(text)
    assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
    sm = samples(text)
    assert value(sm, "fio_source_non_json_lines_total", source=stdout_with_note) == 1
    # unified_rw_reporting: 'mixed' metrics; gtod_reduce: IOPS but no latency at all
    u = dict(jobname="u", jobid=0, source=unified_gtod_result)
    raw_u = json.loads(unified_gtod_result.read_text())["jobs"][0]["mixed"]
    assert value(sm, "fio_mixed_ios_total", **u) == raw_u["total_ios"]
    assert not has(sm, "fio_mixed_clat_seconds_count", **u)
    assert not has(sm, "fio_read_ios_total", **u)
    assert value(sm, "fio_job_hygiene_problem", **u, problem="gtod_reduce") == 1
    # client/server: host is hostname:port from fio, jobs by position
    host = client_results["host"]
    for jobid in (0, 1):
        assert value(sm, "fio_job_info", jobname="cr", jobid=jobid, host=host, source=client_results["final"]) == 1
    assert not has(sm, "fio_job_info", jobname="All clients")  # no total row beside its parts
    # plain json: a histogram with only +Inf (count and sum, no bins)
    p = dict(jobname="plain", jobid=0, source=plain_json_result)
    raw_p = json.loads(plain_json_result.read_text())["jobs"][0]["write"]["clat_ns"]
    assert value(sm, "fio_write_clat_seconds_count", **p) == raw_p["N"]
    assert not has(sm, "fio_write_clat_seconds_bucket", **p, le="0.001")


def test_interval_numbers_come_from_the_last_two_records(status_stream):
    docs = decode_all(status_stream.read_text())
    a, b = docs[-2]["jobs"][0], docs[-1]["jobs"][0]
    sm = samples(exposition(watcher_for(status_stream)))
    lab = dict(jobname="st", jobid=0, source=status_stream)
    dt = (b["job_runtime"] - a["job_runtime"]) / 1000
    assert value(sm, "fio_read_interval_iops", **lab) == pytest.approx(
        (b["read"]["total_ios"] - a["read"]["total_ios"]) / dt
    )
    na, nb = a["read"]["clat_ns"]["N"], b["read"]["clat_ns"]["N"]
    mean = (b["read"]["clat_ns"]["mean"] * nb - a["read"]["clat_ns"]["mean"] * na) / (nb - na) / 1e9
    assert value(sm, "fio_read_interval_clat_mean_seconds", **lab) == pytest.approx(mean)
    assert value(sm, "fio_read_ios_total", **lab) == b["read"]["total_ios"]


# ---------------------------------------------------------------------------------------------
# live streams


def test_stream_read_while_fio_runs(tmp_path, processes, fio_bin):
    """fio writes a status record every second; each poll reads only the new bytes and the
    exposition follows the records while the jobs are still running."""
    out = tmp_path / "live.json"
    extra = ("--output-format=json+", "--status-interval=1", f"--output={out}")
    proc = processes.start(
        "fio-live",
        [fio_bin, *fio_job_args("live", tmp_path, size="4m", rw="randread", runtime=3, extra=extra)],
        cwd=tmp_path,
    )
    watcher = watcher_for(out, idle_s=2.0)
    seen_running: list[float] = []
    while proc.popen.poll() is None:
        time.sleep(0.3)
        if not out.exists():
            continue
        sm = samples(exposition(watcher))
        state = watcher.sources.get(str(out))
        if state is None or state.latest is None:
            continue
        assert state.tailer.offset <= out.stat().st_size
        if has(sm, "fio_read_ios_total", jobname="live") and proc.popen.poll() is None:
            assert value(sm, "fio_job_finished", jobname="live") == 0
            seen_running.append(value(sm, "fio_read_ios_total", jobname="live"))
    assert proc.popen.returncode == 0, proc.output()
    assert len(seen_running) >= 2 and seen_running == sorted(seen_running) and seen_running[0] < seen_running[-1]
    sm = samples(exposition(watcher))
    state = watcher.sources[str(out)]
    # the whole file was read exactly once, in pieces
    assert state.tailer.offset == out.stat().st_size
    docs = decode_all(out.read_text())
    assert state.records == len(docs)
    assert value(sm, "fio_read_ios_total", jobname="live") == docs[-1]["jobs"][0]["read"]["total_ios"]
    watcher.clock = Clock(offset=10.0)  # later: the file has stopped growing -> finished
    sm = samples(exposition(watcher))
    assert value(sm, "fio_job_finished", jobname="live") == 1


def test_incremental_read_costs_only_new_bytes(status_stream, tmp_path):
    text = status_stream.read_bytes()
    path = tmp_path / "grow.json"
    path.write_bytes(b"")
    tailer = FileTailer(str(path))
    got = []
    step = 1000
    for i in range(0, len(text), step):
        with open(path, "ab") as fh:
            fh.write(text[i : i + step])
        r = tailer.read_new()
        assert r.new_bytes == len(text[i : i + step]) and r.reset is None
        got.extend(r.documents)
    assert len(got) == len(decode_all(text.decode())) and tailer.offset == len(text)
    # while the last record is being written, only it is held back, never the whole file
    assert tailer.stream.pending == 0


def test_truncation_and_rotation_restart_from_the_beginning(status_stream, jsonplus_result, tmp_path):
    path = tmp_path / "out.json"
    shutil.copy(status_stream, path)
    watcher = watcher_for(path)
    sm = samples(exposition(watcher))
    assert has(sm, "fio_read_ios_total", jobname="st")
    # a new fio run with the same --output truncates the file and writes a shorter one
    text = jsonplus_result.read_bytes()
    assert len(text) < path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(0)
        fh.write(text)
    sm = samples(exposition(watcher))
    assert value(sm, "fio_source_resets_total", source=path) == 1
    assert not has(sm, "fio_read_ios_total", jobname="st")
    assert has(sm, "fio_read_ios_total", jobname="rr", jobid=1)
    # rotation: a new file (new inode) moved into place, even if longer
    tmp = tmp_path / "new.json"
    shutil.copy(status_stream, tmp)
    os.replace(tmp, path)
    sm = samples(exposition(watcher))
    assert value(sm, "fio_source_resets_total", source=path) == 2
    assert has(sm, "fio_read_ios_total", jobname="st") and not has(sm, "fio_read_ios_total", jobname="rr")


def test_finished_jobs_stay_until_retention(jsonplus_result, tmp_path):
    path = tmp_path / "done.json"
    shutil.copy(jsonplus_result, path)
    end = json.loads(path.read_text())["timestamp_ms"] / 1000
    clock = Clock()
    watcher = watcher_for(path, clock=clock, retention_s=600, idle_s=5)
    clock.offset = end + 60 - time.time()  # a minute after the run
    os.utime(path, (end, end))
    sm = samples(exposition(watcher))
    assert value(sm, "fio_job_finished", jobname="sw") == 1
    assert value(sm, "fio_job_end_timestamp_seconds", jobname="sw") == end
    clock.offset = end + 601 - time.time()  # past the retention
    sm = samples(exposition(watcher))
    assert not has(sm, "fio_job_info") and not has(sm, "fio_read_ios_total")
    assert value(sm, "fio_source_up", source=path) == 1 and value(sm, "fio_up") == 1


def test_read_errors_give_up_0_and_hide_stale_values(jsonplus_result, tmp_path, caplog):
    path = tmp_path / "flaky.json"
    shutil.copy(jsonplus_result, path)
    watcher = watcher_for(path, tmp_path / "missing-dir")
    sm = samples(exposition(watcher))
    assert value(sm, "fio_up") == 0  # a watched path is missing
    assert has(sm, "fio_read_ios_total", jobname="rr")
    assert "missing-dir: no such file or directory" in caplog.text
    # the file becomes unreadable (here: replaced by a link to a file whose read fails with EIO)
    path.unlink()
    path.symlink_to("/proc/self/mem")
    caplog.clear()
    sm = samples(exposition(watcher))
    assert value(sm, "fio_source_up", source=path) == 0
    assert value(sm, "fio_source_read_errors_total", source=path) == 1
    assert not has(sm, "fio_read_ios_total")  # never the old values as if fresh
    assert f"cannot read fio output file {path}" in caplog.text
    # one log line per cause, not one per scrape
    caplog.clear()
    exposition(watcher)
    assert "cannot read" not in caplog.text


def test_a_symlink_out_of_the_watched_directory_is_refused(jsonplus_result, status_stream, tmp_path, caplog):
    """A symlink in a watched directory is read if it stays inside it, refused (down, unreadable,
    counted, one log line naming it and where it leads) if it leads out: the exporter reads what
    it was pointed at, nothing else its user can read."""
    d, outside = tmp_path / "watched", tmp_path / "outside"
    d.mkdir()
    outside.mkdir()
    shutil.copy(jsonplus_result, d / "real.json")
    (d / "inside.json").symlink_to("real.json")
    shutil.copy(status_stream, outside / "elsewhere.json")
    (d / "out.json").symlink_to(outside / "elsewhere.json")
    watcher = watcher_for(d)
    sm = samples(exposition(watcher))
    assert value(sm, "fio_source_up", source=d / "real.json") == 1
    assert value(sm, "fio_source_up", source=d / "inside.json") == 1
    out = d / "out.json"
    assert value(sm, "fio_source_up", source=out) == 0
    assert value(sm, "fio_source_error_info", source=out, reason="unreadable") == 1
    assert value(sm, "fio_source_read_errors_total", source=out) == 1
    assert not has(sm, "fio_job_info", source=out) and not has(sm, "fio_job_info", jobname="st")
    assert value(sm, "fio_up") == 0
    lines = [r.getMessage() for r in caplog.records if str(out) in r.getMessage()]
    assert lines == [
        f"cannot read fio output file {out}: a symbolic link to {outside / 'elsewhere.json'}, outside the "
        f"watched directory {d}: not followed (only files inside a watched directory are read)"
    ]
    caplog.clear()
    exposition(watcher)
    assert str(out) not in caplog.text  # one line per cause, not one per scrape
    # the same file named directly is the user's choice: read
    sm = samples(exposition(watcher_for(out)))
    assert value(sm, "fio_source_up", source=out) == 1 and has(sm, "fio_job_info", jobname="st")


# ---------------------------------------------------------------------------------------------
# the programs


def _fixture_sysfs(root: Path) -> Path:
    disk = root / "block" / "sdb"
    (disk / "queue").mkdir(parents=True)
    (disk / "size").write_text("16384\n")
    for f, v in (("logical_block_size", "512"), ("physical_block_size", "4096"), ("max_sectors_kb", "512")):
        (disk / "queue" / f).write_text(v + "\n")
    return root


def test_serve_cli_end_to_end(jsonplus_result, tmp_path, processes):
    watch = tmp_path / "results"
    watch.mkdir()
    shutil.copy(jsonplus_result, watch / "a.json")
    (watch / "job.fio").write_text("[x]\n")  # not matching the pattern: ignored
    port, proc = start_fio_exporter(
        processes, "--fio.watch", watch, "--fio.host", "vm7", "--collector.sysfs", _fixture_sysfs(tmp_path / "sys")
    )
    _, text, sm = first_scrape(port, proc, "fio-exporter")
    assert (
        value(sm, "fio_read_ios_total", jobname="rr", jobid=0, host="vm7")
        == json.loads(jsonplus_result.read_text())["jobs"][0]["read"]["total_ios"]
    )
    assert value(sm, "fio_guest_disk_physical_block_size_bytes", disk="sdb") == 4096
    assert not has(sm, "fio_source_up", source=watch / "job.fio")
    assert requests.get(f"http://127.0.0.1:{port}/probe?target=x", timeout=5).status_code == 404


def test_run_wrapper_serves_while_fio_runs(tmp_path, processes, fio_bin):
    port = free_port()
    proc = processes.start(
        "fio-exporter-run",
        [
            venv_tool("fio-exporter"),
            "run",
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--run.linger",
            "3s",
            "--run.output",
            tmp_path / "run.json",
            "--no-collector.guest-disk",
            "--",
            fio_bin,
            "--name=w",
            f"--filename={tmp_path / 'w.dat'}",
            "--size=2m",
            "--rw=randwrite",
            "--bs=4k",
            "--ioengine=psync",
            "--iodepth=2",
            "--runtime=3",
            "--time_based",
        ],
        cwd=tmp_path,
    )
    wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=proc)
    live = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        sm = samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
        if value(sm, "fio_run_running") == 1 and has(sm, "fio_write_ios_total", jobname="w"):
            live = sm
            break
        time.sleep(0.2)
    assert live is not None, proc.output()
    assert value(live, "fio_job_finished", jobname="w") == 0
    # the wrapper added json+: a real histogram while the job runs
    assert has(live, "fio_write_clat_seconds_bucket", jobname="w", le="0.001")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        sm = samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
        if value(sm, "fio_run_running") == 0 and value(sm, "fio_job_finished", jobname="w") == 1:
            break
        time.sleep(0.2)
    assert value(sm, "fio_run_exit_code") == 0
    assert value(sm, "fio_job_finished", jobname="w") == 1
    docs = decode_all((tmp_path / "run.json").read_text())
    assert value(sm, "fio_write_ios_total", jobname="w") == docs[-1]["jobs"][0]["write"]["total_ios"]
    # fio's 'note:' about iodepth with a sync engine went to the same stdout and was skipped
    assert value(sm, "fio_source_non_json_lines_total") == 1
    assert proc.popen.wait(15) == 0


def test_convert_cli(jsonplus_result, status_stream, tmp_path):
    tool = venv_tool("fio-exporter")
    out = subprocess.run([tool, "convert", jsonplus_result, status_stream], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    text = out.stdout.decode()
    assert promtool_check_metrics(text).returncode == 0
    assert (
        value(samples(text), "fio_read_ios_total", jobname="rr", jobid=1)
        == json.loads(jsonplus_result.read_text())["jobs"][1]["read"]["total_ios"]
    )
    assert "fio_guest_disk" not in text
    bad = subprocess.run([tool, "convert", tmp_path / "nope.json"], capture_output=True, timeout=60)
    assert bad.returncode == 1 and b"nope.json: no such file or directory" in bad.stderr
    assert "fio_up 0.0" in bad.stdout.decode()


@pytest.mark.parametrize("sub", [[], ["serve"], ["run"], ["convert"]])
def test_help_documents_each_subcommand(sub):
    out = subprocess.run([venv_tool("fio-exporter"), *sub, "--help"], capture_output=True, timeout=30)
    assert out.returncode == 0
    text = out.stdout.decode()
    assert "usage: fio-exporter" in text
    if sub in (["serve"], ["run"]):
        assert "--fio.retention" in text and "--fio.cache-size" in text and "--collector.sysfs" in text


def test_config_errors_name_file_and_key(tmp_path):
    cfg = tmp_path / "fio.yml"
    cfg.write_text("watch: [/tmp]\nretention: soon\n")
    out = run_entry_point("fio-exporter", ["--config.file", cfg])
    assert out.returncode == 2 and f"{cfg}: retention" in out.stderr
    cfg.write_text("watchh: [/tmp]\n")
    out = run_entry_point("fio-exporter", ["--config.file", cfg])
    assert out.returncode == 2 and f"{cfg}: watchh: unknown key" in out.stderr
    out = run_entry_point("fio-exporter", ["serve", "--fio.cache-size", "lots"])
    assert out.returncode == 2 and "--fio.cache-size: expected a size" in out.stderr
    cfg.write_text("max_document_size: 10\n")
    out = run_entry_point("fio-exporter", ["--config.file", cfg])
    assert out.returncode == 2 and f"{cfg}: max_document_size: must be at least 1KiB" in out.stderr
    out = run_entry_point("fio-exporter", ["convert", "--fio.max-document-size", "10", cfg])
    assert out.returncode == 2 and "--fio.max-document-size: must be at least 1KiB" in out.stderr
