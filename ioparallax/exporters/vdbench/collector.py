"""Exposition: vdbench output directories as Prometheus metric families, built fresh per scrape.

On each scrape the :class:`VdbenchCollector` asks the watcher to read what the files gained
(O(new bytes)), then yields the families of every directory. Nothing is updated in the
background and no sample carries a timestamp. Every metric is listed in docs/vdbench.md.

Two views of a run, never mixed in one family: ``vdbench_run_*`` from flatfile.html (the run as
vdbench totals it over all hosts) and ``vdbench_host_*`` from the host reports of a multi-host run
(hd1.html...); ``sum by (source, run, seq)`` of the host counters matches the run's.
"""

from __future__ import annotations

import logging

# The staged, lazily created families of the fio exporter: a directory whose exposition fails
# half-way shows none of its series.
from ioparallax.exporters.common.families import MetricFamilies
from ioparallax.exporters.common.watch.scrape import WatchCollector, source_state
from ioparallax.exporters.vdbench.hygiene import HygieneConfig, run_cannot_tell, run_problems
from ioparallax.exporters.vdbench.parse import FlatRow
from ioparallax.exporters.vdbench.reader import LINE_REASONS, MAX_RUNS_PER_FILE, DirectoryState, RunState

log = logging.getLogger(__name__)

RUN_LABELS = ["source", "run", "seq"]
HOST_LABELS = ["source", "run", "seq", "host"]
_MS = 1e-3

#: (flatfile column, metric suffix, scale to base units, HELP) of the per-row gauges, exported for
#: the latest interval (``_interval_``) and the run's summary row (``_average_``).
ROW_GAUGES: tuple[tuple[str, str, float, str], ...] = (
    ("rate", "iops", 1.0, "I/O operations per second (rate)"),
    ("mb/sec", "bandwidth_bytes_per_second", 1048576.0, "Bytes per second (MB/sec, MB = 2^20 bytes)"),
    ("bytes/io", "transfer_size_bytes", 1.0, "Mean bytes per I/O (bytes/io)"),
    ("read%", "read_ratio", 0.01, "Share of the I/Os that were reads (read%/100)"),
    ("resp", "response_mean_seconds", _MS, "Mean response time of all I/Os (resp, ms)"),
    ("read_resp", "read_response_mean_seconds", _MS, "Mean read response time (read_resp, ms)"),
    ("write_resp", "write_response_mean_seconds", _MS, "Mean write response time (write_resp, ms)"),
    ("resp_max", "response_max_seconds", _MS, "Largest response time (resp_max, ms)"),
    ("read_max", "read_response_max_seconds", _MS, "Largest read response time (read max, ms; vdbench 5.04.07)"),
    ("write_max", "write_response_max_seconds", _MS, "Largest write response time (write max, ms; vdbench 5.04.07)"),
    ("resp_std", "response_stddev_seconds", _MS, "Standard deviation of the response times (resp_std, ms)"),
    ("queue_depth", "queue_depth", 1.0, "vdbench's average I/O queue depth (queue_depth; Little's law)"),
    ("cpu_used", "cpu_used_ratio", 0.01, "Host CPU busy, user+system (cpu_used/100)"),
    ("cpu_kernel", "cpu_system_ratio", 0.01, "Host CPU in system mode (cpu_kernel/100)"),
    ("ks_rate", "kstat_iops", 1.0, "Solaris kstat I/O rate (ks_rate)"),
    ("ks_resp", "kstat_response_mean_seconds", _MS, "Solaris kstat response time (ks_resp, ms)"),
    ("ks_busy%", "kstat_busy_ratio", 0.01, "Solaris kstat busy share (ks_busy%/100)"),
)

#: Requested values (flatfile columns, constant over a run): column, suffix, scale, HELP.
REQUESTED: tuple[tuple[str, str, float, str], ...] = (
    ("reqrate", "requested_iops", 1.0, "I/O rate the run asked for (reqrate; absent for iorate=max)"),
    ("threads", "threads", 1.0, "Threads (outstanding I/Os) the run asked for (threads)"),
    ("xfersize", "requested_transfer_size_bytes", 1.0, "Transfer size asked for (xfersize; absent when mixed)"),
    ("lunsize", "lun_size_bytes", 2.0**30, "Total size of the run's LUNs (lunsize, GB = 2^30 bytes)"),
    ("compratio", "requested_compression_ratio", 1.0, "Compression ratio the data was written with (compratio)"),
    ("dedupratio", "requested_dedup_ratio", 1.0, "Dedup ratio the data was written with (dedupratio)"),
)

INFO_COLUMNS = ("xfersize", "threads", "rdpct", "rhpct", "whpct", "seekpct")

SD_INFO = ["lun", "openflags", "size", "range", "host", "threads"]
HD_INFO = ["system", "shell", "user", "vdbench"]
WD_INFO = ["sd", "xfersize", "rdpct", "seekpct", "range", "skew", "rhpct", "whpct"]
RD_INFO = ["wd", "iorate", "elapsed", "interval", "warmup", "threads", "forthreads", "forxfersize", "forrdpct"]
GENERAL_INFO = ["compratio", "dedupratio", "dedupunit", "data_errors"]
#: Parameter names given another label name: an sd='s host= (``hd*``, a pattern of hd= names) is
#: not the ``host`` of the vdbench_host_* series (one host's name).
_LABEL = {"host": "hosts"}


def _text(name: str) -> str:
    """A file or directory name as a label value: bytes that are not UTF-8 (kept by os.listdir
    as surrogate escapes) become U+FFFD instead of failing the exposition."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _raw(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


class VdbenchCollector(WatchCollector):
    prefix = "vdbench"
    output = "vdbench output"
    up_help = (
        "1 if every watched path and vdbench output directory could be read on this scrape and "
        "no file is down, else 0 (vdbench_source_error_info and the log name the file and the cause)."
    )
    duration_help = "Seconds spent reading vdbench output and building this scrape."

    hygiene_config = HygieneConfig

    def source(self, fams: MetricFamilies, row: tuple[DirectoryState, bool, bool]) -> bool:
        d, finished, visible = row
        self._directory(fams, d, finished, visible)
        return d.up

    def failed(self, fams: MetricFamilies, row: tuple[DirectoryState, bool, bool], exc: Exception) -> None:
        d = row[0]
        log.error("exposing vdbench output directory %s failed", d.path, exc_info=exc)
        # vdbench's error family names the file of the directory that is down; "" here: the
        # directory as a whole
        source_state(fams, "vdbench", _UP_HELP, _ERR_HELP, [_text(d.path)], False, "internal_error", (["file"], [""]))
        log.debug("cause: %s", exc)

    # -----------------------------------------------------------------------------------------
    def _directory(self, fams: MetricFamilies, d: DirectoryState, finished: bool, visible: bool) -> None:
        src = [_text(d.path)]
        fams.gauge("vdbench_source_up", _UP_HELP, ["source"], src, 1.0 if d.up else 0.0)
        for fs in d.files.values():
            if fs.reason is not None:
                fams.gauge(
                    "vdbench_source_error_info",
                    _ERR_HELP,
                    ["source", "file", "reason"],
                    src + [_text(fs.name), fs.reason],
                    1,
                )
        if d.error is not None:  # the directory itself: file ""
            fams.gauge("vdbench_source_error_info", _ERR_HELP, ["source", "file", "reason"], src + ["", d.error[0]], 1)
        for name, reason, _ in d.small_file_errors:
            fams.gauge(
                "vdbench_source_error_info", _ERR_HELP, ["source", "file", "reason"], src + [_text(name), reason], 1
            )
        fams.gauge(
            "vdbench_source_finished",
            "1 once no file of the directory has grown for --vdbench.idle-timeout (the run ended).",
            ["source"],
            src,
            1.0 if finished else 0.0,
        )
        if d.last_growth:
            fams.gauge(
                "vdbench_source_last_change_timestamp_seconds",
                "When a file of the directory last grew (its mtime), seconds since the epoch.",
                ["source"],
                src,
                d.last_growth,
            )
        for fs in d.files.values():
            fl = src + [_text(fs.name)]
            fams.counter(
                "vdbench_source_rows_total",
                "Interval and summary rows read from the file.",
                ["source", "file"],
                fl,
                fs.rows,
            )
            for reason in LINE_REASONS:
                fams.counter(
                    "vdbench_source_rejected_lines_total",
                    "Lines rejected as garbage: not_a_number, invalid_value (NaN, infinity, negative), "
                    "wrong_column_count (a cut-off or foreign row), before_header, bad_header, too_long, "
                    "not_text (NUL bytes).",
                    ["source", "file", "reason"],
                    fl + [reason],
                    fs.rejected.get(reason, 0),
                )
            fams.counter(
                "vdbench_source_resets_total",
                "Times the file was truncated, replaced or rewritten and read again from the start.",
                ["source", "file"],
                fl,
                fs.resets,
            )
            fams.counter(
                "vdbench_source_runs_dropped_total",
                f"Runs of the file no longer shown: only the newest {MAX_RUNS_PER_FILE} are kept (a file "
                "whose every row starts a run would otherwise grow without bound).",
                ["source", "file"],
                fl,
                fs.runs_dropped,
            )
            fams.counter(
                "vdbench_source_read_errors_total",
                "Failed attempts to read the file.",
                ["source", "file"],
                fl,
                fs.read_errors,
            )
        if d.normal_p95_ms is not None and d.normal_p95_file is not None:
            fams.gauge(
                "vdbench_report_normal_percentile_seconds",
                "A '95th percentile' latency an HCIBench-style summary states (95%tile_LAT). HCIBench "
                "computes it as mean + 1.645 x stddev, an estimate under a normal distribution, not a "
                "measured percentile (docs/hygiene.md, percentile_from_stddev).",
                ["source", "file", "quantile"],
                src + [_text(d.normal_p95_file), "0.95"],
                d.normal_p95_ms * _MS,
            )
        pf = d.parmfile
        if pf is not None:
            self._parmfile(fams, d)
        if not visible or d.error is not None:
            return  # finished longer ago than the retention, or unreadable now: health only
        for fs in d.files.values():
            if fs.reason in ("not_vdbench", "internal_error"):
                continue  # never show a file judged garbage as data
            for run in fs.runs:
                if fs.host:
                    self._run(fams, "vdbench_host", HOST_LABELS, src + [run.name, str(run.seq), fs.host], run)
                else:
                    labels = src + [run.name, str(run.seq)]
                    self._run(fams, "vdbench_run", RUN_LABELS, labels, run)
                    self._run_facts(fams, d, labels, run)

    def _parmfile(self, fams: MetricFamilies, d: DirectoryState) -> None:
        pf = d.parmfile
        assert pf is not None
        src = [_text(d.path)]
        fams.gauge(
            "vdbench_parmfile_info",
            "General parameters of the parameter file as run (parmfile.html; empty: not given). Value 1.",
            ["source"] + GENERAL_INFO,
            src + [pf.general.get(k, "") for k in GENERAL_INFO],
            1.0,
        )
        for kind, table, keys in (
            ("hd", pf.hd, HD_INFO),
            ("sd", pf.sd, SD_INFO),
            ("wd", pf.wd, WD_INFO),
            ("rd", pf.rd, RD_INFO),
        ):
            for name, entry in table.items():
                fams.gauge(
                    f"vdbench_parmfile_{kind}_info",
                    f"A {kind}= definition as run (parmfile.html, {kind}=default merged in; raw vdbench "
                    "values, empty: not given). Value 1.",
                    ["source", kind] + [_LABEL.get(k, k) for k in keys],
                    src + [name] + [entry.get(k, "") for k in keys],
                    1.0,
                )

    def _run_facts(self, fams: MetricFamilies, d: DirectoryState, labels: list[str], run: RunState) -> None:
        first = run.first or run.summary
        values = first.values if first is not None else {}
        fams.gauge(
            "vdbench_run_info",
            "What a run asked for, from its first flatfile row (xfersize, threads, rdpct, rhpct, whpct, "
            "seekpct; empty: n/a or absent) and vdbench's version. Value 1.",
            RUN_LABELS + list(INFO_COLUMNS) + ["version"],
            labels + [_raw(values.get(c)) for c in INFO_COLUMNS] + [(first.version if first else None) or ""],
            1.0,
        )
        for col, suffix, scale, doc in REQUESTED:
            value = values.get(col)
            if value is None and d.parmfile is not None and col in ("compratio", "dedupratio"):
                try:
                    value = float(d.parmfile.general[col]) if col in d.parmfile.general else None
                except ValueError:
                    value = None
            if value is not None:
                fams.gauge(f"vdbench_run_{suffix}", doc + ".", RUN_LABELS, labels, value * scale)
        requested = {c: values.get(c) for c in ("compratio", "dedupratio", "lunsize")}
        for problem in run_problems(d.parmfile, run.name, requested, self.hygiene, d.normal_p95_ms is not None):
            fams.gauge(
                "vdbench_run_hygiene_problem",
                "1 for each benchmark hygiene trap found in what the run asked for; see docs/hygiene.md "
                "for each problem.",
                RUN_LABELS + ["problem"],
                labels + [problem],
                1.0,
            )
        for problem in run_cannot_tell(d.parmfile, run.name, requested, self.hygiene):
            fams.gauge(
                "vdbench_run_hygiene_cannot_tell",
                "1 for each hygiene check that cannot decide for the run (no parmfile.html, or it lacks "
                "the run's rd=: buffered_io, short_runtime; no size known: working_set_below_cache); "
                "see docs/hygiene.md.",
                RUN_LABELS + ["problem"],
                labels + [problem],
                1.0,
            )

    def _run(self, fams: MetricFamilies, p: str, names: list[str], labels: list[str], run: RunState) -> None:
        what = "the host's" if p == "vdbench_host" else "the run's (all hosts)"
        fams.counter(
            f"{p}_read_ops_total",
            f"Reads of {what} intervals: rate x read% x interval seconds.",
            names,
            labels,
            run.read_ops,
        )
        fams.counter(
            f"{p}_write_ops_total",
            f"Writes of {what} intervals: rate x (1-read%) x interval seconds.",
            names,
            labels,
            run.write_ops,
        )
        fams.counter(
            f"{p}_read_bytes_total",
            f"Bytes read in {what} intervals: MB/sec x 2^20 x seconds x read% (split by the share of "
            "reads: exact when reads and writes have one transfer size).",
            names,
            labels,
            run.read_bytes,
        )
        fams.counter(
            f"{p}_write_bytes_total",
            f"Bytes written in {what} intervals (MB/sec x 2^20 x seconds x (1-read%)).",
            names,
            labels,
            run.write_bytes,
        )
        if run.read_resp_known:
            fams.counter(
                f"{p}_read_response_seconds_total",
                "Sum of read response times (read_resp x reads): rate() over rate() of the read ops "
                "gives the mean. Absent when a row with reads lacks read_resp.",
                names,
                labels,
                run.read_resp_s,
            )
        if run.write_resp_known:
            fams.counter(
                f"{p}_write_response_seconds_total",
                "Sum of write response times (write_resp x writes); absent when a row with writes lacks write_resp.",
                names,
                labels,
                run.write_resp_s,
            )
        fams.counter(f"{p}_intervals_total", "Interval rows integrated into the counters.", names, labels, run.rows)
        fams.counter(
            f"{p}_measured_seconds_total",
            "Seconds the integrated intervals cover (the rd's interval=, else the rows' tod spacing).",
            names,
            labels,
            run.seconds,
        )
        fams.gauge(
            f"{p}_finished",
            "1 once the run's summary row (avg_F-L) was written: the run ended.",
            names,
            labels,
            1.0 if run.finished else 0.0,
        )
        if run.latest is not None and run.latest.interval is not None:
            fams.gauge(
                f"{p}_interval_number", "Number of the latest interval (Interval).", names, labels, run.latest.interval
            )
            self._row(fams, f"{p}_interval", names, labels, run.latest, "in the latest interval")
        if run.summary is not None and run.summary.summary is not None:
            first, last = run.summary.summary
            fams.gauge(
                f"{p}_average_first_interval",
                "First interval the summary row averages (avg_F-L).",
                names,
                labels,
                first,
            )
            fams.gauge(
                f"{p}_average_last_interval", "Last interval the summary row averages (avg_F-L).", names, labels, last
            )
            self._row(fams, f"{p}_average", names, labels, run.summary, "over the run (its avg_F-L summary row)")

    def _row(self, fams: MetricFamilies, p: str, names: list[str], labels: list[str], row: FlatRow, when: str) -> None:
        for col, suffix, scale, doc in ROW_GAUGES:
            value = row.values.get(col)
            if value is not None:
                fams.gauge(f"{p}_{suffix}", f"{doc}, {when}.", names, labels, value * scale)


_UP_HELP = (
    "1 if every file of the vdbench output directory could be read on this scrape and none holds "
    "garbage only; 0: see vdbench_source_error_info."
)
_ERR_HELP = (
    "Why a file of the directory is down (present only while it is): unreadable, not_vdbench (no "
    "vdbench column header), too_large (parmfile or summary above 4 MiB), truncated (convert: its last "
    "line is cut off), internal_error; file is empty when the directory itself cannot be listed. The "
    "log names the file and the cause. Value 1."
)
