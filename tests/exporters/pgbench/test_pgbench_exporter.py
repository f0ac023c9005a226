"""The real pgbench-exporter process: serve a growing file live, run (wrap) a pgbench, convert,
--help/--version, configuration errors; and ioparallax-check on pgbench command lines."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import requests

from tests.exporters.pgbench.test_pgbench_reader import PG14, PG15, summary_number
from tests.support import (
    first_scrape,
    free_port,
    has,
    promtool_check_metrics,
    run_entry_point,
    samples,
    start_exporter,
    value,
    venv_tool,
    wait_for_http,
)

EXPORTER = "pgbench-exporter"


def scrape_until(url: str, proc, condition, timeout: float = 60.0) -> dict:
    """Scrape until ``condition(samples)`` holds (a deadline for a loaded machine, not a timing)."""
    deadline = time.monotonic() + timeout
    sm: dict = {}
    while time.monotonic() < deadline:
        sm = samples(requests.get(url, timeout=10).text)
        if condition(sm):
            return sm
        assert proc.popen.poll() is None, proc.output()
        time.sleep(0.2)
    raise AssertionError(f"condition not met within {timeout} s; last scrape: {sorted(sm)[:20]}")


def test_serve_follows_a_growing_file_live(tmp_path, processes):
    results = tmp_path / "results"
    results.mkdir()
    lines = PG15.read_text().splitlines(keepends=True)
    live = results / "pgbench-db01.out"
    live.write_text("".join(lines[:3]))  # version, vacuum, the first progress line
    (results / "unrelated.txt").write_text("not followed: not *pgbench*\n")
    port, proc = start_exporter(processes, EXPORTER, "--pgbench.watch", results)
    _, text, sm = first_scrape(port, proc, "pgbench-exporter")
    assert value(sm, "pgbench_exporter_build_info") == 1
    assert value(sm, "pgbench_transactions_total", source=live, run=1) == 4443  # 444.3 tps x 10 s
    assert value(sm, "pgbench_run_finished", source=live, run=1) == 0
    assert not has(sm, "pgbench_source_up", source=results / "unrelated.txt")
    # pgbench writes two more intervals and its summary: the next scrape has them
    with open(live, "a") as fh:
        fh.write("".join(lines[3:]))
    sm = samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
    assert value(sm, "pgbench_transactions_total", source=live, run=1) == 12221
    assert value(sm, "pgbench_failed_transactions_total", source=live, run=1) == 0
    assert value(sm, "pgbench_run_finished", source=live, run=1) == 1
    assert requests.get(f"http://127.0.0.1:{port}/probe?target=x", timeout=5).status_code == 404
    check = promtool_check_metrics(text)
    assert check.returncode == 0, check.stderr.decode()


FAKE_PGBENCH = """\
import json, os, sys, time
# A stand-in for pgbench: records its argv, writes the progress lines of a real run to stderr,
# waits for the test's go file, then writes the summary to stdout and exits 0.
out, go, fixture = sys.argv[1], sys.argv[2], sys.argv[3]
with open(out, "w") as fh:
    json.dump(sys.argv[4:], fh)
lines = open(fixture).read().splitlines()
split = next(i for i, line in enumerate(lines) if line.startswith("transaction type:"))
for line in lines[:split]:
    print(line, file=sys.stderr, flush=True)
while not os.path.exists(go):
    time.sleep(0.05)
for line in lines[split:]:
    print(line, flush=True)
"""


def test_run_wrapper_serves_while_pgbench_runs(tmp_path, processes):
    fake = tmp_path / "fake_pgbench.py"
    fake.write_text(FAKE_PGBENCH)
    argv_file, go = tmp_path / "argv.json", tmp_path / "go"
    wrapper = tmp_path / "pgbench"  # the command's first word; its own arguments follow
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {fake} {argv_file} {go} {PG14} "$@"\n')
    wrapper.chmod(0o755)
    port = free_port()
    output = tmp_path / "run.out"
    proc = processes.start(
        "pgbench-exporter-run",
        [
            venv_tool(EXPORTER),
            "run",
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--run.linger",
            "60s",
            "--run.output",
            output,
            "--",
            wrapper,
            "-c",
            "1",
            "-T",
            "600",
            "bench",
        ],
        cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=proc)
    src = str(output)
    live = scrape_until(
        url,
        proc,
        lambda sm: (
            has(sm, "pgbench_intervals_total", source=src) and value(sm, "pgbench_intervals_total", source=src) == 10
        ),
    )
    assert value(live, "pgbench_command_running") == 1
    assert value(live, "pgbench_run_finished", source=src, run=1) == 0
    assert value(live, "pgbench_transactions_total", source=src, run=1) == 148068  # the progress lines alone
    # the wrapper added a progress interval: without one pgbench prints nothing until it ends
    assert json.loads(argv_file.read_text()) == ["-P", "5", "-c", "1", "-T", "600", "bench"]
    go.touch()
    done = scrape_until(
        url,
        proc,
        lambda sm: value(sm, "pgbench_command_running") == 0 and has(sm, "pgbench_run_reported_tps", source=src),
    )
    assert value(done, "pgbench_command_exit_code") == 0
    assert value(done, "pgbench_transactions_total", source=src, run=1) == summary_number(
        PG14, "number of transactions actually processed:"
    )
    assert value(done, "pgbench_run_finished", source=src, run=1) == 1
    proc.stop()


def test_convert_cli(tmp_path):
    ok = subprocess.run(
        [venv_tool(EXPORTER), "convert", str(PG14), str(PG15)], capture_output=True, text=True, timeout=60
    )
    assert ok.returncode == 0, ok.stderr
    assert promtool_check_metrics(ok.stdout).returncode == 0
    sm = samples(ok.stdout)
    assert value(sm, "pgbench_transactions_total", source=PG14, run=1) == 148071
    assert value(sm, "pgbench_transactions_total", source=PG15, run=1) == 12221
    missing = subprocess.run(
        [venv_tool(EXPORTER), "convert", str(tmp_path / "nope")], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1
    assert f"pgbench-exporter convert: {tmp_path / 'nope'}: no such file or directory" in missing.stderr
    assert "pgbench_up 0.0" in missing.stdout


@pytest.mark.parametrize("sub", [[], ["serve"], ["run"], ["convert"]])
def test_help_documents_each_subcommand(sub):
    out = run_entry_point(EXPORTER, [*sub, "--help"])
    assert out.returncode == 0
    assert "usage: pgbench-exporter" in out.stdout
    if sub in ([], ["serve"], ["run"]):
        assert "--pgbench.watch" in out.stdout or sub == []
    if sub in (["serve"], ["run"]):
        assert "--pgbench.shared-buffers" in out.stdout and "--pgbench.retention" in out.stdout
        assert ":9767" in out.stdout


def test_config_errors_name_file_and_key(tmp_path):
    cfg = tmp_path / "pgbench.yml"
    cfg.write_text("watch: [/tmp]\nretention: soon\n")
    out = run_entry_point(EXPORTER, ["--config.file", cfg])
    assert out.returncode == 2 and f"{cfg}: retention" in out.stderr
    cfg.write_text("watchh: [/tmp]\n")
    out = run_entry_point(EXPORTER, ["--config.file", cfg])
    assert out.returncode == 2 and f"{cfg}: watchh: unknown key" in out.stderr
    out = run_entry_point(EXPORTER, ["serve", "--pgbench.shared-buffers", "lots"])
    assert out.returncode == 2 and "--pgbench.shared-buffers: expected a size" in out.stderr
    cfg.write_text("max_connections: 0\n")
    out = run_entry_point(EXPORTER, ["--config.file", cfg])
    assert out.returncode == 2 and f"{cfg}: max_connections" in out.stderr
    out = run_entry_point(EXPORTER, ["run", "--run.linger", "soon", "--", "pgbench"])
    assert out.returncode == 2 and "--run.linger" in out.stderr


# ---------------------------------------------------------------------------------------------
# ioparallax-check


def check(*argv) -> subprocess.CompletedProcess:
    return run_entry_point("ioparallax-check", list(argv))


def test_check_a_storage_run_that_measures_memory():
    """pgbench -i -s 10 on a VM with 16 GiB and shared_buffers 4 GiB: 160 MB fits in both."""
    out = check("--shared-buffers", "4GiB", "--memory-size", "16GiB", "pgbench", "-i", "-s", "10", "bench")
    assert out.returncode == 1, out.stderr
    assert "initialisation (scale 10) of database bench" in out.stdout
    assert "TRAP database_fits_in_shared_buffers: scale 10 is about 160 MB" in out.stdout
    assert "TRAP database_fits_in_memory" in out.stdout
    assert "docs/runbook.md#ioparallaxpgbenchrunhygiene" in out.stdout
    big = check("--shared-buffers", "4GiB", "--memory-size", "16GiB", "pgbench", "-i", "-s", "2000", "bench")
    assert big.returncode == 0 and "no hygiene trap found" in big.stdout


@pytest.mark.parametrize(
    "argv, traps, cannot_tell",
    [
        (["pgbench", "-c", "10", "-j", "2", "-T", "1800", "-P", "5", "bench"], [], []),
        (["pgbench", "-c10", "-j2", "-T60", "-P5", "bench"], ["shorter_than_checkpoint"], []),
        (
            ["pgbench", "--client=10", "--time=30", "--progress=5", "bench"],
            ["shorter_than_checkpoint", "short_runtime"],
            [],
        ),
        (["pgbench", "-c", "200", "-T", "900", "-P", "5", "bench"], ["clients_above_max_connections"], []),
        (["pgbench", "-C", "-c", "10", "-T", "900", "-P", "5", "bench"], ["reconnect_per_transaction"], []),
        (["pgbench", "-nr", "-c", "8", "-t", "1000", "bench"], ["no_progress_report"], ["shorter_than_checkpoint"]),
        (["/usr/lib/postgresql/16/bin/pgbench", "-c", "8", "-T", "900", "-P", "1", "-S", "bench"], [], []),
    ],
)
def test_check_pgbench_run_command_lines(argv, traps, cannot_tell):
    out = check(*argv)
    found = {
        w: sorted(
            line.split()[1 if w == "TRAP" else 2].rstrip(":")
            for line in out.stdout.splitlines()
            if line.strip().startswith(w + " ")
        )
        for w in ("TRAP", "CANNOT")
    }
    assert found["TRAP"] == sorted(traps), out.stdout
    assert found["CANNOT"] == sorted(cannot_tell), out.stdout
    assert out.returncode == (1 if traps else 0)


def test_check_the_server_settings_change_the_verdict():
    argv = ["pgbench", "-c", "150", "-T", "900", "-P", "5", "bench"]
    assert check(*argv).returncode == 1
    ok = check("--max-connections", "200", "--checkpoint-timeout", "15m", *argv)
    assert ok.returncode == 0, ok.stdout
    short = check("--checkpoint-timeout", "30m", "--max-connections", "200", *argv)
    assert "TRAP shorter_than_checkpoint: -T 900 s is shorter than checkpoint_timeout (1800 s)" in short.stdout


def test_check_a_script_file_holding_a_pgbench_command(tmp_path):
    script = tmp_path / "run-bench.sh"
    script.write_text("pgbench -c 16 -j 4 -T 120 -P 10 bench\n")
    out = check(script)
    assert out.returncode == 1 and "TRAP shorter_than_checkpoint" in out.stdout


@pytest.mark.parametrize("argv", [["pgbench", "-c"], ["pgbench", "-x", "bench"], ["pgbench", "-T", "1h", "bench"]])
def test_check_a_command_line_pgbench_would_refuse(argv):
    out = check(*argv)
    assert out.returncode == 2 and "ioparallax-check: pgbench command line:" in out.stderr
