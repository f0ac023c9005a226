"""Exposition: pgbench's runs as Prometheus metric families, built fresh on every scrape.

On each scrape the :class:`PgbenchCollector` asks the watcher to read what the files gained
(O(new bytes)), then yields the families of every file and run. Nothing is updated in the
background and no sample carries a timestamp. Every metric is listed in docs/pgbench.md.

The application view's series are ``pgbench_transactions_total``,
``pgbench_failed_transactions_total`` and ``pgbench_transaction_latency_seconds`` (labels
``source``, ``run``); the VM they belong to is the scrape target's ``vm`` label, set in
Prometheus, as for fio-exporter. docs/pgbench.md says how any other application joins the view.
"""

from __future__ import annotations

import logging

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from ioparallax.exporters.common.exposition import printable
from ioparallax.exporters.common.families import MetricFamilies, finite
from ioparallax.exporters.common.watch.scrape import WatchCollector, source_state
from ioparallax.exporters.pgbench.hygiene import HygieneConfig, RunFacts, find_problems
from ioparallax.exporters.pgbench.reader import LINE_REASONS, FileState, RunState

log = logging.getLogger(__name__)

RUN_LABELS = ["source", "run"]
INFO = ["version", "transaction_type", "query_mode", "data"]


class PgbenchCollector(WatchCollector):
    prefix = "pgbench"
    output = "pgbench output"
    up_help = (
        "1 if every watched path and pgbench file could be read on this scrape and no file is down, "
        "else 0 (pgbench_source_error_info and the log name the file and the cause)."
    )
    duration_help = "Seconds spent reading pgbench output and building this scrape."

    hygiene_config = HygieneConfig

    def source(self, fams: MetricFamilies, row: tuple[FileState, bool, bool]) -> bool:
        fs, ended, visible = row
        self._file(fams, fs, ended, visible)
        return fs.up

    def failed(self, fams: MetricFamilies, row: tuple[FileState, bool, bool], exc: Exception) -> None:
        fs = row[0]
        log.error("exposing pgbench file %s failed", fs.path, exc_info=exc)
        source_state(fams, "pgbench", _UP_HELP, _ERR_HELP, [printable(fs.path)], False, "internal_error")

    def _file(self, fams: MetricFamilies, fs: FileState, ended: bool, visible: bool) -> None:
        src = [printable(fs.path)]
        source_state(fams, "pgbench", _UP_HELP, _ERR_HELP, src, fs.up, fs.reason)
        fams.counter(
            "pgbench_source_lines_total",
            "pgbench data lines read from the file: progress, version and summary lines, log rows.",
            ["source"],
            src,
            fs.data_lines,
        )
        fams.counter(
            "pgbench_source_other_lines_total",
            "Lines that are not pgbench data, skipped: pgbench's messages ('starting vacuum...end.', "
            "client errors), per-statement reports, anything else in the file.",
            ["source"],
            src,
            fs.other_lines,
        )
        for reason in LINE_REASONS:
            fams.counter(
                "pgbench_source_rejected_lines_total",
                "Lines rejected as garbage: bad_progress (a cut-off or garbled progress line), bad_summary, "
                "bad_log_line, wrong_field_count, not_a_number, invalid_value (NaN, infinity, negative), "
                "too_long, not_text (NUL bytes).",
                ["source", "reason"],
                src + [reason],
                fs.rejected.get(reason, 0),
            )
        fams.counter(
            "pgbench_source_resets_total",
            "Times the file was truncated, replaced or rewritten and read again from the start (its runs start over).",
            ["source"],
            src,
            fs.resets,
        )
        fams.counter(
            "pgbench_source_read_errors_total", "Failed attempts to read the file.", ["source"], src, fs.read_errors
        )
        fams.gauge(
            "pgbench_source_finished",
            "1 once the file's writer ended: the wrapped pgbench exited, or the file has not grown for "
            "--pgbench.idle-timeout (and 3 progress intervals).",
            ["source"],
            src,
            1.0 if ended else 0.0,
        )
        if fs.last_growth:
            fams.gauge(
                "pgbench_source_last_change_timestamp_seconds",
                "When the file last grew (its mtime), seconds since the epoch.",
                ["source"],
                src,
                fs.last_growth,
            )
        if not visible or fs.reason in ("not_pgbench", "internal_error", "unreadable"):
            return  # finished longer ago than the retention, or down: health only, never stale data
        for run in fs.runs:
            if run.has_data:
                self._run(fams, src + [str(run.seq)], run, ended or run.finished)

    def _run(self, fams: MetricFamilies, labels: list[str], run: RunState, finished: bool) -> None:
        s = run.summary
        fams.gauge(
            "pgbench_run_info",
            "A pgbench run: pgbench's version (its first line, 14+), the summary's transaction type and "
            "query mode (empty until the run ends), and where its numbers come from (data: progress, "
            "aggregate, transactions (--log), summary). Value 1.",
            RUN_LABELS + INFO,
            labels + [run.version or "", s.transaction_type or "", s.query_mode or "", run.kind or "summary"],
            1.0,
        )
        fams.counter(
            "pgbench_transactions_total",
            "Transactions that succeeded: from the progress lines (tps x interval), raised to the summary's "
            "'number of transactions actually processed' when the run ends; or the logs' counts. The "
            "application view's throughput.",
            RUN_LABELS,
            labels,
            run.transactions,
        )
        if run.failures.known:
            fams.counter(
                "pgbench_failed_transactions_total",
                "Transactions that failed (serialization or deadlock errors not retried; PostgreSQL 15+: "
                "the progress lines' 'failed', the summary's 'number of failed transactions'; aggregate logs: "
                "non-zero only with --failures-detailed). Absent for pgbench 14 and older, which abort instead.",
                RUN_LABELS,
                labels,
                run.failures.total,
            )
        if run.latency.known:
            buckets = run.cumulative_buckets()
            shown = [(floatToGoString(e), n) for e, n in buckets] if buckets is not None else []
            shown.append(("+Inf", run.latency.count))
            fams.add(
                HistogramMetricFamily,
                "pgbench_transaction_latency_seconds",
                "Latency of the successful transactions: _sum = mean latency x transactions per interval "
                "(progress lines, the summary's 'latency average', aggregate logs' sum_latency); buckets "
                "only from per-transaction --log files, else +Inf alone.",
                RUN_LABELS,
                labels,
                shown,
                finite("pgbench_transaction_latency_seconds_sum", run.latency.sum_s),
            )
        if run.lag.known:
            fams.add(
                HistogramMetricFamily,
                "pgbench_schedule_lag_seconds",
                "--rate: how late transactions started against their schedule (progress 'lag', the "
                "summary's 'rate limit schedule lag', the logs' lag); +Inf, _sum and _count only.",
                RUN_LABELS,
                labels,
                [("+Inf", run.lag.count)],
                finite("pgbench_schedule_lag_seconds_sum", run.lag.sum_s),
            )
        if run.skipped.known:
            fams.counter(
                "pgbench_skipped_transactions_total",
                "--rate with --latency-limit: transactions skipped because they would have started too late.",
                RUN_LABELS,
                labels,
                run.skipped.total,
            )
        if run.retried.known:
            fams.counter(
                "pgbench_retried_transactions_total",
                "--max-tries: transactions retried after a serialization or deadlock error.",
                RUN_LABELS,
                labels,
                run.retried.total,
            )
            fams.counter("pgbench_retries_total", "--max-tries: retries made.", RUN_LABELS, labels, run.retries.total)
        fams.counter(
            "pgbench_intervals_total",
            "Progress intervals or aggregate log intervals integrated into the counters.",
            RUN_LABELS,
            labels,
            run.intervals,
        )
        fams.counter(
            "pgbench_measured_seconds_total",
            "Seconds the integrated intervals cover.",
            RUN_LABELS,
            labels,
            run.measured_s,
        )
        fams.counter(
            "pgbench_client_aborts_total",
            "Clients pgbench reported aborted ('client N ... aborted'): their transactions stop; pgbench "
            "goes on with the others.",
            RUN_LABELS,
            labels,
            run.client_aborts,
        )
        fams.gauge(
            "pgbench_run_finished",
            "1 once the run ended: its summary was written, or its file's writer ended.",
            RUN_LABELS,
            labels,
            1.0 if finished else 0.0,
        )
        fams.gauge(
            "pgbench_run_aborted",
            "1 when pgbench said 'Run was aborted; the above results are incomplete'.",
            RUN_LABELS,
            labels,
            1.0 if run.aborted else 0.0,
        )
        p = run.latest
        if p is not None:
            fams.gauge(
                "pgbench_interval_tps",
                "pgbench's own tps over its latest progress interval (successful transactions per second).",
                RUN_LABELS,
                labels,
                p.tps,
            )
            if p.latency_mean_s is not None:
                fams.gauge(
                    "pgbench_interval_latency_mean_seconds",
                    "Mean transaction latency over the latest progress interval (lat).",
                    RUN_LABELS,
                    labels,
                    p.latency_mean_s,
                )
            if p.latency_stddev_s is not None:
                fams.gauge(
                    "pgbench_interval_latency_stddev_seconds",
                    "Standard deviation of the transaction latency over the latest progress interval (stddev).",
                    RUN_LABELS,
                    labels,
                    p.latency_stddev_s,
                )
            if p.lag_mean_s is not None:
                fams.gauge(
                    "pgbench_interval_lag_mean_seconds",
                    "--rate: mean schedule lag over the latest progress interval (lag).",
                    RUN_LABELS,
                    labels,
                    p.lag_mean_s,
                )
        a = run.latest_aggregate
        if a is not None:
            fams.gauge(
                "pgbench_interval_latency_max_seconds",
                "Largest transaction latency of the latest aggregate log interval (max_latency).",
                RUN_LABELS,
                labels,
                a.latency_max_s,
            )
        self._summary(fams, labels, run)

    def _summary(self, fams: MetricFamilies, labels: list[str], run: RunState) -> None:
        s = run.summary
        for value, name, doc in (
            (s.scaling_factor, "pgbench_run_scaling_factor", "The summary's 'scaling factor' (-s of 'pgbench -i')."),
            (s.clients, "pgbench_run_clients", "The summary's 'number of clients' (-c)."),
            (s.threads, "pgbench_run_threads", "The summary's 'number of threads' (-j)."),
            (s.duration_s, "pgbench_run_duration_seconds", "The summary's 'duration' (-T)."),
            (
                s.processed,
                "pgbench_run_reported_transactions",
                "The summary's 'number of transactions actually processed' (successful), exact.",
            ),
            (
                s.failed,
                "pgbench_run_reported_failed_transactions",
                "The summary's 'number of failed transactions' (15+).",
            ),
            (
                s.tps,
                "pgbench_run_reported_tps",
                "The summary's tps (without initial connection time / excluding connections establishing).",
            ),
            (s.latency_mean_s, "pgbench_run_reported_latency_mean_seconds", "The summary's 'latency average'."),
            (s.latency_stddev_s, "pgbench_run_reported_latency_stddev_seconds", "The summary's 'latency stddev'."),
            (
                s.connection_time_s,
                "pgbench_run_reported_connection_seconds",
                "The summary's 'initial connection time' (14+), or 'average connection time' with -C.",
            ),
        ):
            if value is not None:
                fams.gauge(name, doc, RUN_LABELS, labels, float(value))
        if not s.started:
            return
        facts = RunFacts(
            scale=s.scaling_factor,
            clients=s.clients,
            duration_s=s.duration_s,
            transactions_per_client=s.transactions_per_client,
            progress_known=False,
        )
        for f in find_problems(facts, self.hygiene):
            fams.gauge(
                "pgbench_run_hygiene_problem" if f.verdict == "trap" else "pgbench_run_hygiene_cannot_tell",
                "1 for each benchmark hygiene trap found in what the run did (its summary); see "
                "docs/hygiene.md#pgbench for each problem."
                if f.verdict == "trap"
                else "1 for each hygiene check that cannot decide for the run; see docs/hygiene.md#pgbench.",
                RUN_LABELS + ["problem"],
                labels + [f.problem],
                1.0,
            )


_UP_HELP = "1 if the pgbench file could be read on this scrape and is pgbench output; 0: see pgbench_source_error_info."
_ERR_HELP = (
    "Why the file is down (present only while it is): unreadable, not_pgbench (no pgbench line in its first "
    "256 KiB), truncated (convert: its last line is cut off), internal_error. The log names the file and the "
    "cause. Value 1."
)
