"""The report's first page: the verdict table (one row per VM disk, one column per trap), the views
that were missing and why, and the alerts that fired in the range; and the pieces of it the other
sections reuse (a verdict cell, a disk's anchor, times)."""

from __future__ import annotations

import csv
import io
import logging
from datetime import UTC, datetime

from ioparallax.report.analysis import Side, VerdictTable, fired_alerts
from ioparallax.report.context import ReportContext
from ioparallax.report.data import Key
from ioparallax.report.sections import Section, esc
from ioparallax.report.verdicts import TRAPS, VIEW_NAMES, State, Verdict

log = logging.getLogger(__name__)

STATE_CLASS = {State.OK: "ok", State.DISTORTED: "distorted", State.NOT_MEASURABLE: "nm"}


def disk_anchor(key: Key) -> str:
    return "disk-" + "".join(c if c.isalnum() else "-" for c in f"{key[0]}-{key[1]}")


def runbook(ctx: ReportContext, anchor: str) -> str:
    """The runbook section, as the alerts' runbook_url annotations point to it (mixin config)."""
    return ctx.config.alerts.runbook(anchor)


def verdict_cell(ctx: ReportContext, v: Verdict) -> str:
    number = f'<span class="num">{esc(v.number)}</span>' if v.number else ""
    return (
        f'<td class="v {STATE_CLASS[v.state]}"><span class="state">{esc(v.state.value)}</span>{number}'
        f'<span class="thr">threshold {esc(v.threshold)}</span>'
        f'<span class="why">{esc(v.sentence)} <a href="{esc(runbook(ctx, v.anchor))}">runbook</a></span></td>'
    )


def fmt_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_clock(t: float, ctx: ReportContext) -> str:
    """The time of day when the range lies within one UTC day (the header gives the date)."""
    day = lambda x: datetime.fromtimestamp(x, UTC).date()  # noqa: E731
    if day(ctx.start) == day(ctx.end):
        return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")
    return fmt_time(t)


def verdicts_csv(table: VerdictTable) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["vm", "disk", "trap", "state", "number", "threshold", "sentence"])
    for key, row in table.items():
        for trap, v in row.items():
            w.writerow([key[0], key[1], trap, v.state.value, v.number, v.threshold, v.sentence])
    return buf.getvalue()


def verdicts_section(side: Side) -> Section:
    ctx, ds = side.ctx, side.data
    table = side.verdicts.get()
    parts: list[str] = []
    if ds.missing_views:
        items = "".join(
            f"<li><b>{esc(VIEW_NAMES.get(v, v))}</b>: {esc(why)}</li>" for v, why in ds.missing_views.items()
        )
        parts.append(
            f'<div class="missing"><p><b>Views missing in this range.</b> The cells that need them '
            f'are "Not measurable".</p><ul>{items}</ul></div>'
        )
    if len(ds.clusters) > 1:
        parts.append(
            f'<div class="missing"><p><b>Several clusters in the data</b> '
            f"({esc(', '.join(sorted(ds.clusters)))}): VM disks of the same name would be merged. Make "
            f"one report per cluster with --match '{{{esc(ctx.config.cluster_label)}=\"...\"}}'.</p></div>"
        )
    if ds.errors:
        items = "".join(f"<li>{esc(f)}: {esc(e)}</li>" for f, e in sorted(ds.errors.items()))
        parts.append(
            f'<div class="missing"><p><b>Queries that failed</b> (their figures and cells are empty):'
            f"</p><ul>{items}</ul></div>"
        )
    if not table:
        parts.append(
            '<p class="empty">No VM disk had data in any view in this range: nothing to judge. '
            "Check the range, the --match matchers and that Prometheus loads the recording rules.</p>"
        )
    else:
        counts = {s: sum(1 for row in table.values() for v in row.values() if v.state is s) for s in State}
        parts.append(
            f'<p class="counts">{len(table)} VM disks, {len(TRAPS)} traps each: '
            f'<span class="pill ok">{counts[State.OK]} OK</span> '
            f'<span class="pill distorted">{counts[State.DISTORTED]} Distorted</span> '
            f'<span class="pill nm">{counts[State.NOT_MEASURABLE]} Not measurable</span></p>'
        )
        head = "".join(f'<th><a href="{esc(runbook(ctx, a))}">{esc(t)}</a></th>' for t, a in TRAPS.values())
        rows = []
        for key, row in table.items():
            vd = ds.vdisk_of.get(key, "")
            name = (
                f'<th class="disk"><a href="#{disk_anchor(key)}">{esc(key[0])}<br>{esc(key[1])}</a>'
                + (f'<span class="thr">vdisk {esc(vd)}</span>' if vd else "")
                + "</th>"
            )
            rows.append("<tr>" + name + "".join(verdict_cell(ctx, row[t]) for t in TRAPS) + "</tr>")
        parts.append(
            f'<table class="verdicts"><thead><tr><th>VM disk</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )
    idle = ds.idle_disks()
    tail = [k for k in idle if ds.tail_only(k)]
    idle = [k for k in idle if k not in tail]
    if idle:
        parts.append(
            f'<p class="note">Idle in the whole range (known to a view, no I/O, not judged): '
            f"{esc(', '.join(f'{vm} {disk}' for vm, disk in idle))}.</p>"
        )
    if tail:
        parts.append(
            f'<p class="note">No fio job in the range, not judged: '
            f"{esc(', '.join(f'{vm} {disk}' for vm, disk in tail))}. Their VM and storage views "
            f"show I/O only in the range's first {ds.settle_seconds:.0f} s or so, then none: the rules' "
            f"{esc(ds.rate_window)} windows "
            f"(and vCenter's 20 s samples) still counting I/O that ended before the range.</p>"
        )
    return Section(
        id="verdicts",
        title="Verdicts",
        html="".join(parts),
        csv={"verdicts.csv": verdicts_csv(table)} if table else {},
        promql=[
            ds.promql[f]
            for f in (
                "guest_read_bytes",
                "vm_read_bytes",
                "storage_read_bytes",
                "job_elapsed",
                "read_zero",
                "write_zero",
                "write_zero_measurable",
                "read_cache",
                "working_set_to_cache",
                "iodepth",
                "vm_outstanding",
                "buffered",
                "rmw_read_to_write",
                "hygiene",
                "partitions",
            )
        ],
    )


def alerts_section(side: Side) -> Section:
    ctx, ds = side.ctx, side.data
    fired = fired_alerts(ds, ctx.step)
    if "alerts" in ds.errors:
        body = f'<p class="error">The alerts could not be read: {esc(ds.errors["alerts"])}</p>'
    elif not fired:
        body = "<p>No alert fired in the range.</p>"
    else:
        rows = "".join(
            f"<tr><td>{esc(name)}</td><td>{esc(labels.get('severity', ''))}</td>"
            f"<td>{esc(', '.join(f'{k}={v}' for k, v in sorted(labels.items()) if k != 'severity'))}</td>"
            f"<td>{esc(fmt_clock(a, ctx))}</td><td>{'still firing' if still else esc(fmt_clock(b, ctx))}</td></tr>"
            for name, labels, a, b, still in fired
        )
        body = (
            f'<table class="alerts"><thead><tr><th>Alert</th><th>Severity</th><th>Labels</th>'
            f"<th>Firing from (UTC)</th><th>Until</th></tr></thead><tbody>{rows}</tbody></table>"
            f'<p class="note">Times are those of the report\'s steps ({ctx.step:g} s): an alert is '
            f"listed from the first step at which it was firing to the last.</p>"
        )
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["alertname", "labels", "from", "until"])
    for name, labels, a, b, still in fired:
        w.writerow(
            [
                name,
                ";".join(f"{k}={v}" for k, v in sorted(labels.items())),
                fmt_time(a),
                "still firing" if still else fmt_time(b),
            ]
        )
    return Section(
        id="alerts",
        title="Alerts that fired",
        html=body,
        csv={"alerts.csv": buf.getvalue()},
        promql=[ds.promql["alerts"]],
    )
