"""pgbench-exporter's reader and exposition on real pgbench outputs (tests/exporters/pgbench/fixtures/, see
its README) and on lines written to pgbench's formats.

Expected values come from a plain reading of the same text (str.split on the fixture's lines,
the numbers pgbench printed), never from the reader under test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ioparallax.exporters.pgbench.collector import PgbenchCollector
from ioparallax.exporters.pgbench.hygiene import HygieneConfig
from ioparallax.exporters.pgbench.parse import (
    AggregateRow,
    InvalidLine,
    Summary,
    TransactionRow,
    classify,
    parse_log_line,
    parse_progress,
)
from ioparallax.exporters.pgbench.reader import LATENCY_BUCKETS_S, WatchConfig, Watcher
from tests.support import exposition_of, has, promtool_check_metrics, samples, value

FIXTURES = Path(__file__).parent / "fixtures"
PG14 = FIXTURES / "pg14.7-progress-60s.out"
PG15 = FIXTURES / "pg15.3-progress-10s.out"
PG16_2 = FIXTURES / "pg16.2-progress-60s.out"
PG14_SUMMARY = FIXTURES / "pg14-summary-10500-clients.out"
PG16_WINDOWS = FIXTURES / "pg16.3-windows-progress-6s.out"
PG16_LAG = FIXTURES / "pg16.4-rate-lag-aborted.out"
PG14_IDLE = FIXTURES / "pg14.8-progress-idle.out"
PG9 = FIXTURES / "pg9-summary-including-connections.out"
AGG14 = FIXTURES / "pg14-docs-aggregate.log"
AGG15 = FIXTURES / "pg15-docs-aggregate-failures.log"


def exposition(*paths: Path, hygiene: HygieneConfig | None = None) -> str:
    w = Watcher(WatchConfig(paths=[str(p) for p in paths], pattern="*", retention_s=float("inf")))
    w.poll()
    w.finish()
    return exposition_of(PgbenchCollector(w, hygiene, poll=False))


def summary_number(path: Path, prefix: str) -> float:
    """A number the summary printed, by a plain search of the file."""
    for line in path.read_text().splitlines():
        if line.startswith(prefix):
            return float(re.findall(r"[0-9.]+", line[len(prefix) :])[0])
    raise AssertionError(f"{prefix!r} not in {path.name}")


def plain_progress(path: Path) -> list[tuple[float, float, float | None]]:
    """(time s, tps, lat ms) of each progress line, by a plain split."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("progress: "):
            t = line.replace(",", "").split()
            out.append((float(t[1]), float(t[3]), float(t[6]) if "lat" in t else None))
    return out


# ---------------------------------------------------------------------------------------------
# the "done when" of issue 31: convert of real pgbench 14 and 15+ outputs gives their
# transactions and failures


@pytest.mark.parametrize(
    "path, failures",
    [
        (PG15, 0),  # 15.3: "number of failed transactions: 0 (0.000%)" and ", 0 failed" progress
        (PG16_2, 0),
        (PG16_WINDOWS, 0),
        (PG16_LAG, 0),
        (PG14, None),  # 14.7: no failure counting (pgbench 14 aborts a client on an error)
        (PG14_SUMMARY, None),
        (PG9, None),
    ],
)
def test_real_outputs_give_their_transactions_and_failures(path, failures):
    sm = samples(exposition(path))
    src = str(path)
    processed = summary_number(path, "number of transactions actually processed:")
    assert value(sm, "pgbench_up") == 1
    assert value(sm, "pgbench_transactions_total", source=src, run=1) == processed
    assert value(sm, "pgbench_run_reported_transactions", source=src, run=1) == processed
    assert value(sm, "pgbench_transaction_latency_seconds_count", source=src, run=1) == processed
    mean = summary_number(path, "latency average") / 1000
    assert value(sm, "pgbench_transaction_latency_seconds_sum", source=src, run=1) == pytest.approx(
        mean * processed, rel=1e-9
    )
    assert value(sm, "pgbench_run_finished", source=src, run=1) == 1
    if failures is None:
        assert not has(sm, "pgbench_failed_transactions_total", source=src)
    else:
        assert summary_number(path, "number of failed transactions:") == failures
        assert value(sm, "pgbench_failed_transactions_total", source=src, run=1) == failures
        assert value(sm, "pgbench_run_reported_failed_transactions", source=src, run=1) == failures


def test_progress_lines_are_integrated_before_the_summary_comes(tmp_path):
    """While pgbench runs only its progress lines exist: each adds tps x interval transactions
    and lat x transactions of latency; the summary then raises the counter to its exact count."""
    lines = PG14.read_text().splitlines()
    live = tmp_path / "pgbench.out"
    before_summary = "\n".join(lines[: lines.index("transaction type: <builtin: TPC-B (sort of)>")]) + "\n"
    live.write_text(before_summary)
    sm = samples(exposition(live))
    progress = plain_progress(PG14)
    expected, lat, prev = 0.0, 0.0, 0.0
    for t, tps, ms in progress:
        n = round(tps * (t - prev))
        expected += n
        lat += (ms or 0) / 1000 * n
        prev = t
    src = str(live)
    assert value(sm, "pgbench_transactions_total", source=src, run=1) == expected == 148068
    assert value(sm, "pgbench_transaction_latency_seconds_sum", source=src, run=1) == pytest.approx(lat)
    assert value(sm, "pgbench_intervals_total", source=src, run=1) == 10
    assert value(sm, "pgbench_measured_seconds_total", source=src, run=1) == 600
    assert value(sm, "pgbench_interval_tps", source=src, run=1) == 244.6
    assert value(sm, "pgbench_interval_latency_mean_seconds", source=src, run=1) == pytest.approx(0.004088)
    assert not has(sm, "pgbench_run_reported_transactions", source=src)
    info = [k for k in sm if k[0] == "pgbench_run_info"]
    assert dict(info[0][1])["version"] == "14.7"


def test_pg15_progress_fields_and_summary():
    sm = samples(exposition(PG15))
    src = str(PG15)
    assert value(sm, "pgbench_intervals_total", source=src, run=1) == 3
    assert value(sm, "pgbench_interval_tps", source=src, run=1) == 477.9
    assert value(sm, "pgbench_run_clients", source=src, run=1) == 50
    assert value(sm, "pgbench_run_threads", source=src, run=1) == 2
    assert value(sm, "pgbench_run_duration_seconds", source=src, run=1) == 30
    assert value(sm, "pgbench_run_reported_tps", source=src, run=1) == 406.261459
    assert value(sm, "pgbench_run_reported_connection_seconds", source=src, run=1) == pytest.approx(0.05901)
    # -T 30 under checkpoint_timeout (5 min) and under 3 scrapes of 15 s: both flagged
    assert value(sm, "pgbench_run_hygiene_problem", source=src, run=1, problem="shorter_than_checkpoint") == 1
    assert value(sm, "pgbench_run_hygiene_problem", source=src, run=1, problem="short_runtime") == 1


def test_more_clients_than_max_connections_are_flagged_from_the_summary():
    sm = samples(exposition(PG14_SUMMARY))
    src = str(PG14_SUMMARY)
    assert value(sm, "pgbench_run_clients", source=src, run=1) == 10500
    assert value(sm, "pgbench_run_hygiene_problem", source=src, problem="clients_above_max_connections") == 1
    sm = samples(exposition(PG14_SUMMARY, hygiene=HygieneConfig(max_connections=11000)))
    assert not has(sm, "pgbench_run_hygiene_problem", source=src, problem="clients_above_max_connections")


def test_scale_that_fits_in_memory_is_flagged_from_the_summary():
    sm = samples(exposition(PG15, hygiene=HygieneConfig(shared_buffers_bytes=128 * 2**20, memory_bytes=2 * 2**30)))
    src = str(PG15)
    assert value(sm, "pgbench_run_hygiene_problem", source=src, problem="database_fits_in_shared_buffers") == 1
    assert value(sm, "pgbench_run_hygiene_problem", source=src, problem="database_fits_in_memory") == 1
    sm = samples(exposition(PG15, hygiene=HygieneConfig(shared_buffers_bytes=8 * 2**20)))
    assert not has(sm, "pgbench_run_hygiene_problem", source=src, problem="database_fits_in_shared_buffers")


def test_rate_limited_run_with_client_errors_and_an_abort():
    """16.4 with --rate: lag on every progress line and in the summary; 'client N ... aborted'
    lines between the progress lines (some garbled by concurrent writes) are counted, not data;
    'Run was aborted' marks the run."""
    sm = samples(exposition(PG16_LAG))
    src = str(PG16_LAG)
    text = PG16_LAG.read_text()
    assert value(sm, "pgbench_client_aborts_total", source=src, run=1) == len(
        [line for line in text.splitlines() if re.search(r"client \d+ (script \d+ )?aborted", line)]
    )
    assert value(sm, "pgbench_run_aborted", source=src, run=1) == 1
    processed = summary_number(PG16_LAG, "number of transactions actually processed:")
    lag = float(re.search(r"schedule lag: avg ([0-9.]+)", text)[1]) / 1000
    assert value(sm, "pgbench_schedule_lag_seconds_count", source=src, run=1) == processed
    assert value(sm, "pgbench_schedule_lag_seconds_sum", source=src, run=1) == pytest.approx(lag * processed)
    assert value(sm, "pgbench_interval_lag_mean_seconds", source=src, run=1) == pytest.approx(13.986973)
    assert value(sm, "pgbench_intervals_total", source=src, run=1) == len(plain_progress(PG16_LAG))
    assert value(sm, "pgbench_source_rejected_lines_total", source=src, reason="bad_progress") == 0


def test_idle_intervals_are_data_not_errors():
    """14.8 against a compute scaling up: eight '0.0 tps, lat 0.000 ms' intervals then 8.0 tps;
    no summary (the source stops there): the run is the progress lines alone."""
    sm = samples(exposition(PG14_IDLE))
    src = str(PG14_IDLE)
    assert value(sm, "pgbench_transactions_total", source=src, run=1) == 8  # 8.0 tps x (10.0 - 9.0) s
    assert value(sm, "pgbench_transaction_latency_seconds_sum", source=src, run=1) == pytest.approx(8 * 7.055317)
    assert value(sm, "pgbench_intervals_total", source=src, run=1) == 9
    assert sum(v for (n, _), v in sm.items() if n == "pgbench_source_rejected_lines_total") == 0


def test_the_stalled_windows_client_interval_adds_nothing():
    sm = samples(exposition(PG16_WINDOWS))
    src = str(PG16_WINDOWS)
    assert value(sm, "pgbench_measured_seconds_total", source=src, run=1) == pytest.approx(107.2)
    assert value(sm, "pgbench_interval_tps", source=src, run=1) == 0


def test_old_summary_only_output():
    """9.x: no progress, 'latency average: x ms' with a colon, the including/excluding pair."""
    sm = samples(exposition(PG9))
    src = str(PG9)
    assert value(sm, "pgbench_transactions_total", source=src, run=1) == 3265
    assert value(sm, "pgbench_run_reported_tps", source=src, run=1) == 108.832630  # the excluding one
    assert value(sm, "pgbench_run_reported_latency_mean_seconds", source=src, run=1) == pytest.approx(0.009188)
    info = [dict(k[1]) for k in sm if k[0] == "pgbench_run_info"]
    assert info[0]["data"] == "summary" and info[0]["transaction_type"] == "TPC-B (sort of)"


def test_aggregate_logs_pg14_and_pg15():
    sm = samples(exposition(AGG14, AGG15))
    rows14 = [list(map(int, line.split())) for line in AGG14.read_text().splitlines()]
    src = str(AGG14)
    assert value(sm, "pgbench_transactions_total", source=src, run=1) == sum(r[1] for r in rows14) == 35451
    assert value(sm, "pgbench_transaction_latency_seconds_sum", source=src, run=1) == pytest.approx(
        sum(r[2] for r in rows14) / 1e6
    )
    assert value(sm, "pgbench_intervals_total", source=src, run=1) == 5
    assert value(sm, "pgbench_measured_seconds_total", source=src, run=1) == 8  # 4 spacings of 2 s
    assert value(sm, "pgbench_interval_latency_max_seconds", source=src, run=1) == pytest.approx(0.001411)
    assert not has(sm, "pgbench_failed_transactions_total", source=src)  # <= 14: no failure fields
    rows15 = [list(map(int, line.split())) for line in AGG15.read_text().splitlines()]
    src = str(AGG15)
    assert value(sm, "pgbench_transactions_total", source=src, run=1) == sum(r[1] for r in rows15) == 9986
    assert value(sm, "pgbench_failed_transactions_total", source=src, run=1) == sum(r[13] + r[14] for r in rows15)
    assert value(sm, "pgbench_skipped_transactions_total", source=src, run=1) == sum(r[10] for r in rows15) == 662
    assert value(sm, "pgbench_retried_transactions_total", source=src, run=1) == sum(r[11] for r in rows15)
    assert value(sm, "pgbench_retries_total", source=src, run=1) == sum(r[12] for r in rows15)
    assert value(sm, "pgbench_schedule_lag_seconds_sum", source=src, run=1) == pytest.approx(
        sum(r[6] for r in rows15) / 1e6
    )


def test_exposition_passes_promtool():
    text = exposition(*FIXTURES.glob("*.out"), AGG14, AGG15)
    check = promtool_check_metrics(text)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()


# ---------------------------------------------------------------------------------------------
# formats, line by line


def test_progress_line_formats():
    p = parse_progress("progress: 1.0 s, 333.0 tps, lat 2.977 ms stddev 1.960")
    assert (p.time_s, p.tps, p.latency_mean_s, p.latency_stddev_s, p.failed) == (1.0, 333.0, 0.002977, 0.00196, None)
    p = parse_progress("progress: 1.0 s, 1203.9 tps, lat 0.828 ms stddev 0.183, 0 failed")
    assert p.failed == 0 and p.has_failures
    p = parse_progress(
        "progress: 20.0 s, 99.0 tps, lat 12.5 ms stddev 3.000, 2 failed, lag 0.123 ms, 5 skipped, 3 retried, 4 retries"
    )
    assert (p.failed, p.lag_mean_s, p.skipped, p.retried, p.retries) == (2, pytest.approx(0.000123), 5, 3, 4)
    # <= 14 with --rate --latency-limit: lag and skipped, no failed
    p = parse_progress("progress: 5.0 s, 100.0 tps, lat 1.000 ms stddev 0.100, lag 0.050 ms, 7 skipped")
    assert (p.failed, p.skipped) == (None, 7)
    p = parse_progress("progress: 1650260552.123 s, 10.0 tps, lat 1.000 ms stddev 0.100, 0 failed")
    assert p.epoch and p.time_s == 1650260552.123
    p = parse_progress("progress: 3.0 s, 0.0 tps, lat -nan ms stddev -nan")
    assert p.latency_mean_s is None and p.tps == 0


@pytest.mark.parametrize(
    "line, reason",
    [
        ("progress: 30.0 s, 47", "bad_progress"),
        ("progress: 30.0 s, 47.0 tps, lat 1.0 ms stddev", "bad_progress"),
        ("progress: 30.0 s, nan tps, lat 1.0 ms stddev 0.1", "invalid_value"),
        ("progress: 30.0 s, -5.0 tps", "invalid_value"),
        ("progress: 30.0 s, 1e999 tps", "invalid_value"),
    ],
)
def test_progress_garbage_is_an_invalid_line(line, reason):
    with pytest.raises(InvalidLine) as exc:
        parse_progress(line)
    assert exc.value.reason == reason


def test_epoch_progress_timestamps_integrate_from_the_second_line(tmp_path):
    """--progress-timestamp: the first line's interval is only known once the second comes."""
    f = tmp_path / "pgbench.out"
    f.write_text(
        "progress: 1700000000.000 s, 100.0 tps, lat 1.000 ms stddev 0.100, 0 failed\n"
        "progress: 1700000005.000 s, 200.0 tps, lat 2.000 ms stddev 0.100, 1 failed\n"
    )
    sm = samples(exposition(f))
    assert value(sm, "pgbench_transactions_total", source=str(f), run=1) == 500 + 1000
    assert value(sm, "pgbench_failed_transactions_total", source=str(f), run=1) == 1
    assert value(sm, "pgbench_transaction_latency_seconds_sum", source=str(f), run=1) == pytest.approx(0.5 + 2.0)


def test_summary_lines_of_15_with_retries_and_the_per_script_blocks():
    s = Summary()
    text = """transaction type: multiple scripts
number of transactions actually processed: 80/100
number of failed transactions: 10 (10.000%)
number of transactions retried: 20 (20.000%)
total number of retries: 50
latency average = 1.234 ms
tps = 8.765432 (without initial connection time)
SQL script 1: query.sql
 - number of failed transactions: 99 (50.000%)
 - latency average = 99.999 ms"""
    for line in text.splitlines():
        classify(line.strip(), s)
    assert (s.processed, s.intended, s.failed, s.retried, s.retries) == (80, 100, 10, 20, 50)
    assert s.latency_mean_s == pytest.approx(0.001234) and s.complete


def test_reconnect_summary_has_one_tps_line():
    s = Summary()
    for line in ("average connection time = 1.180 ms", "tps = 3369.004756 (including reconnection times)"):
        classify(line, s)
    assert s.complete and s.tps == 3369.004756 and s.connection_time_s == pytest.approx(0.00118)


@pytest.mark.parametrize(
    "line",
    ["tps = 406.26", "number of transactions actually processed: lots", "latency average = fast ms"],
)
def test_cut_off_summary_lines_are_invalid(line):
    with pytest.raises(InvalidLine):
        classify(line, Summary())


def test_aggregate_layouts_by_field_count():
    base = "1650260552 5178 26171317 177284491527 1136 44462"
    assert parse_log_line(base).layout == "base"
    row = parse_log_line(base + " 2647617 7321113867 0 9866")
    assert isinstance(row, AggregateRow) and row.layout == "lag" and row.lag_sum_s == pytest.approx(2.647617)
    row = parse_log_line(base + " 2647617 7321113867 0 9866 64 7564 28340 4148 0 7")
    assert row.layout == "full_other" and row.failures == 4148 + 0 + 7
    row = parse_log_line(base + " 1 2")  # 15/16 with --max-tries or --failures-detailed alone: ambiguous
    assert row.layout == "base" and row.failures is None and row.retried is None
    with pytest.raises(InvalidLine):
        parse_log_line(base + " 1" * 11)


def test_per_transaction_log_gives_histogram_buckets(tmp_path):
    f = tmp_path / "pgbench_log.4242"
    f.write_text(
        "0 199 2241 0 1175850568 995598\n"
        "0 200 2465 0 1175850568 998079\n"
        "0 201 2513 0 1175850569 608\n"
        "1 202 40000 0 1175850569 2000\n"
        "0 203 failed 0 1175850569 3000\n"
        "0 204 skipped 0 1175850569 4000\n"
    )
    row = parse_log_line("0 201 2513 0 1175850569 608")
    assert isinstance(row, TransactionRow) and row.latency_s == pytest.approx(0.002513)
    sm = samples(exposition(f))
    src = str(f)
    assert value(sm, "pgbench_transactions_total", source=src, run=1) == 4
    assert value(sm, "pgbench_failed_transactions_total", source=src, run=1) == 1
    assert value(sm, "pgbench_skipped_transactions_total", source=src, run=1) == 1
    assert value(sm, "pgbench_transaction_latency_seconds_bucket", source=src, run=1, le="0.0025") == 2
    assert value(sm, "pgbench_transaction_latency_seconds_bucket", source=src, run=1, le="0.005") == 3
    assert value(sm, "pgbench_transaction_latency_seconds_bucket", source=src, run=1, le="0.05") == 4
    assert value(sm, "pgbench_transaction_latency_seconds_bucket", source=src, run=1, le="+Inf") == 4
    assert len([k for k in sm if k[0] == "pgbench_transaction_latency_seconds_bucket"]) == len(LATENCY_BUCKETS_S) + 1


def test_runs_appended_to_one_file_are_separate_runs(tmp_path):
    """A script looping pgbench >> one file: each version line (or a summary followed by more
    lines) starts a run; each run's counters are its own."""
    f = tmp_path / "pgbench-db01.out"
    f.write_text(PG15.read_text() + PG14.read_text() + PG9.read_text())
    sm = samples(exposition(f))
    src = str(f)
    assert value(sm, "pgbench_transactions_total", source=src, run=1) == 12221
    assert value(sm, "pgbench_transactions_total", source=src, run=2) == 148071
    assert value(sm, "pgbench_transactions_total", source=src, run=3) == 3265
    assert not has(sm, "pgbench_transactions_total", source=src, run=4)
