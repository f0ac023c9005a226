"""The fio jobs dashboard (ioparallax-fio.json)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards.base import DIRECTIONS, RI, Expr, new_dashboard
from ioparallax.mixin.dashboards.panels import Q, heat, row, tbl, ts


def fio_jobs(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    J = "{{jobname}} ({{host}})"
    d = new_dashboard(
        cfg,
        "fio",
        "ioparallax / fio jobs",
        "The guest's view: every fio job on the selected VM disks, per interval, with fio's own "
        "percentiles and the benchmark hygiene findings. Jobs join to a VM disk through their "
        "filename (/dev/sdX) and the guest disk's serial (the VMware disk UUID).",
    )
    d.with_row(row("Hygiene"))
    d.with_panel(
        tbl(
            "Hygiene findings",
            "Benchmark traps found in each job's options (fio_job_hygiene_problem, see "
            "docs/hygiene.md): zero_buffers, compressible buffers without a pattern, buffered I/O, "
            "gtod_reduce, a working set below the cache, short time_based runs.",
            "none",
            [f"{e.fio('fio_job_hygiene_problem')} == 1"],
            w=14,
            h=7,
            hide=("Time", "__name__", "Value", "job"),
        )
    )
    d.with_panel(
        tbl(
            "Jobs",
            "Options of each job on the selected VM disks (fio_job_info): file, rw, bs, iodepth, "
            "numjobs, direct, ioengine.",
            "none",
            [e.fio("fio_job_info")],
            w=10,
            h=7,
            hide=("Time", "__name__", "Value", "job", "groupid", "version"),
        )
    )
    for dr in DIRECTIONS:
        d.with_row(row(f"{dr.capitalize()}s"))
        # fio's own number over its last status interval (solid) against Prometheus' rate of its counter
        # (dashed): (title, description, unit, the interval family, the counter)
        rates = (
            (
                f"IOPS, {dr}s",
                "fio's own IOPS over its last status interval (solid) against "
                "Prometheus' rate of the same counter over $__rate_interval (dashed). The gap is how much a "
                "rate window dilutes a burst.",
                "iops",
                "interval_iops",
                "ios_total",
            ),
            (
                f"Bandwidth, {dr}s",
                "fio's interval bandwidth (solid) and the rate of its byte counter (dashed).",
                "binBps",
                "interval_bandwidth_bytes_per_second",
                "bytes_total",
            ),
        )
        for title, desc, unit, interval, counter in rates:
            own = Q(e.fio(f"fio_{dr}_{interval}"), f"{J} interval")
            rate = Q(e.fio_join(f"rate(fio_{dr}_{counter}{e.sel('fio')}[{RI}])"), f"{J} rate")
            d.with_panel(ts(title, desc, unit, [own, rate], w=8, dashed=[".* rate$"]))
        d.with_panel(
            ts(
                f"Completion latency percentiles, {dr}s",
                "fio's own exact clat percentiles (since the job "
                "started) and the mean of its latest status interval with completions (held between "
                "bursts).",
                "s",
                [
                    Q(
                        e.fio(f"fio_{dr}_clat_percentile_seconds", 'percentile=~"50|99|99.9"'),
                        f"{J} p{{{{percentile}}}}",
                    ),
                    Q(
                        e.fio_join(f"last_over_time(fio_{dr}_interval_clat_mean_seconds{e.sel('fio')}[{RI}])"),
                        f"{J} interval mean",
                    ),
                ],
                w=8,
            )
        )
        buckets = e.fio_join(f"rate(fio_{dr}_clat_seconds_bucket{e.sel('fio')}[{RI}])")
        d.with_panel(
            heat(
                f"Completion latency histogram, {dr}s",
                "Completions per latency bucket per second "
                f"(rate of fio_{dr}_clat_seconds_bucket over $__rate_interval).",
                "s",
                Q(f"sum by (le) ({buckets})", "{{le}}", fmt="heatmap"),
                w=24,
            )
        )
    d.with_row(row("Queue"))
    d.with_panel(
        ts(
            "iodepth levels",
            "Share of each job's time with this many I/Os in flight (fio's iodepth "
            "distribution). A job asking QD32 that spends its time at 1-2 is CPU- or engine-bound.",
            "percentunit",
            [Q(e.fio("fio_job_iodepth_level_ratio"), f"{J} depth {{{{depth}}}}")],
            w=12,
            stack=True,
        )
    )
    d.with_panel(
        ts(
            "Asked iodepth",
            "The iodepth option of each job (fio_job_iodepth).",
            "short",
            [Q(e.fio("fio_job_iodepth"), J)],
            w=12,
        )
    )
    return d
