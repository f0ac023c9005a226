"""The VM view dashboard (ioparallax-vcenter.json): vCenter's samples, or Prism's on AHV."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards.base import DIRECTIONS, RI, Expr, min_step, new_dashboard, vm_source_panel
from ioparallax.mixin.dashboards.esxtop import host_panels
from ioparallax.mixin.dashboards.panels import Q, row, ts


def vcenter(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    V = "{{vm}} {{disk}}"

    def per_second(counter: str, by: str = "") -> str:
        # The manager's time integrated in the same window steps together with the counter, so the
        # quotient is exact whatever the window's alignment with the 20 s (30 s) samples (docs/rules.md).
        match = f" / ignoring ({by}) group_left () " if by else " / "
        return e.vm(
            lambda s: (
                f"rate({s(counter)}[{RI}]){match}(rate({s('samples_total')}[{RI}]) * {s('sample_interval_seconds')})"
            )
        )

    def mean(numerator: str, denominator: str) -> str:
        return e.vm(lambda s: f"rate({s(numerator)}[{RI}]) / rate({s(denominator)}[{RI}])")

    def rated(expr: str, legend: str) -> Q:
        return Q(expr, legend, min_step=min_step(expr))

    d = new_dashboard(
        cfg,
        "vcenter",
        "ioparallax / VM view (vCenter, Prism)",
        "The VM's view: vCenter's 20 s samples (Prism's 30 s samples on AHV) as their charts show them "
        "(dashed) beside the true averages integrated from every sample (the _total counters over the "
        "manager's time integrated in $__rate_interval, exact at any alignment with the samples). "
        "Outstanding I/Os, I/O size samples and seeks are vCenter's only: empty on AHV. On ESXi hosts "
        "with an esxtop capture, the last row shows where each command's latency is spent and the CPU ready.",
    )
    d.with_panel(vm_source_panel(e))
    for dr in DIRECTIONS:
        d.with_row(row(f"{dr.capitalize()}s"))
        # The latest sample (dashed) against the true average (solid): (title, description, unit, the
        # sample's family, the integrated counter)
        averaged = (
            (
                f"Ops, {dr}s",
                "Dashed: the latest 20 s sample (30 s on AHV: what the vSphere or Prism chart shows). Solid: "
                "the true average over $__rate_interval, from every sample integrated.",
                "iops",
                "ops_per_second",
                "ops_total",
            ),
            (
                f"Throughput, {dr}s",
                "The latest sample (dashed) and the true average (solid).",
                "binBps",
                "bytes_per_second",
                "bytes_total",
            ),
        )
        for title, desc, unit, sample, counter in averaged:
            latest = Q(e.vm_sample(f"sample_{dr}_{sample}"), f"{V} sample")
            true = rated(per_second(f"{dr}_{counter}"), f"{V} true average")
            d.with_panel(ts(title, desc, unit, [latest, true], w=8, dashed=[".* sample$"]))
        # (title, description, unit, queries, width, the dashed series: the samples)
        panels = (
            (
                f"Latency, {dr}s",
                "vCenter's millisecond counter (sub-ms shows 0; Prism's sample, in microseconds, on AHV), "
                "the microsecond counter (Prism's sample again), and the true op-weighted mean "
                "(integrated latency / integrated ops).",
                "s",
                [
                    Q(e.vm_sample(f"sample_{dr}_latency_seconds"), f"{V} sample (ms)"),
                    Q(e.vm_sample(f"sample_{dr}_latency_precise_seconds"), f"{V} sample (us)"),
                    rated(mean(f"{dr}_latency_seconds_total", f"{dr}_ops_total"), f"{V} true mean"),
                ],
                8,
                ".* sample .*",
            ),
            (
                f"Outstanding I/Os, {dr}s",
                "The sample's OIO against the time-integrated outstanding I/Os (vCenter's only), "
                "and Little's law: ops/s x latency. Implied far below reported: bursts.",
                "short",
                [
                    Q(e.vm_sample(f"sample_{dr}_outstanding_ios"), f"{V} sample OIO"),
                    rated(per_second(f"{dr}_outstanding_seconds_total"), f"{V} mean OIO"),
                    rated(per_second(f"{dr}_latency_seconds_total"), f"{V} Little (ops/s x latency)"),
                ],
                12,
                ".* sample OIO$",
            ),
            (
                f"I/O size, {dr}s",
                "The sample's I/O size (vCenter's only) and the true mean (bytes / ops).",
                "bytes",
                [
                    Q(e.vm_sample(f"sample_{dr}_io_size_bytes"), f"{V} sample"),
                    rated(mean(f"{dr}_bytes_total", f"{dr}_ops_total"), f"{V} true mean"),
                ],
                12,
                ".* sample$",
            ),
        )
        for title, desc, unit, queries, w, dashed in panels:
            d.with_panel(ts(title, desc, unit, queries, w=w, dashed=[dashed]))
    d.with_row(row("Seeks and sampling"))
    d.with_panel(
        ts(
            "Seeks",
            "Seeks by distance class (small < 64, medium 64-8192, large > 8192 LBNs): the latest "
            "sample and the rate of the integrated counter. Mostly small seeks: sequential. vCenter's only.",
            "short",
            [
                Q(e.vm_sample("sample_seeks"), f"{V} {{{{class}}}} sample"),
                rated(per_second("seeks_total", "class"), f"{V} {{{{class}}}} per second"),
            ],
            w=12,
            dashed=[".* sample$"],
        )
    )
    d.with_panel(
        ts(
            "Sample age",
            "Seconds since the end of the latest vCenter (20 s) or Prism (30 s) sample. Above ~60 s (90 s "
            "on AHV) the VM view is stale.",
            "s",
            [Q(e.vm(lambda s: f"time() - {s('sample_timestamp_seconds')}"), V)],
            w=12,
        )
    )
    for panel in host_panels(e):  # ESXi hosts with an esxtop capture
        d.with_row(panel) if isinstance(panel, db.Row) else d.with_panel(panel)
    return d
