"""The demo's status report: where to look, which targets are up, which alerts fire, dashboard coverage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import requests

from ioparallax.simulators.stack.clusters import ClusterPart

if TYPE_CHECKING:
    from ioparallax.simulators.stack.core import Stack


def status(stack: Stack) -> str:
    label = stack.cluster_label or "cluster"
    if stack.named_clusters:
        lines = [f"ioparallax demo, {len(stack.clusters)} simulated clusters in one Prometheus (target label {label}):"]
        lines.extend(
            f"  {label}={p.cluster:20} scenario {p.trace.scenario.name!r} ({_hypervisor(p)}): "
            f"{p.trace.scenario.summary}"
            for p in stack.clusters
        )
        lines.append("")
    else:
        lines = [
            f"ioparallax demo, scenario {stack.scenario!r} ({_hypervisor(stack.clusters[0])}): "
            f"{stack.trace.scenario.summary}",
            "",
        ]
    for name, url in stack.urls.items():
        lines.append(f"  {name:28} {url}")
    lines.append("")
    lines.append("Targets:")

    def where(labels: dict[str, str]) -> str:
        return f"{labels[label]}/" if labels.get(label) else ""

    width = max((len(f"{label}={c}  ") for c in stack.named_clusters), default=0)
    for t in sorted(
        stack.targets(),
        key=lambda t: (t["labels"].get(label, ""), t["labels"].get("job", ""), t["labels"].get("instance", "")),
    ):
        up = {"up": "UP  ", "down": "DOWN"}.get(t["health"], t["health"].upper())
        err = f"  ({t['lastError']})" if t.get("lastError") else ""
        vm = f"  vm={t['labels']['vm']}" if t["labels"].get("vm") else ""
        cl = (f"{label}={t['labels'][label]}" if t["labels"].get(label) else "").ljust(width)
        lines.append(f"  {up} {cl}{t['labels'].get('job', ''):24} {t['labels'].get('instance', '')}{vm}{err}")
    for q, what in (
        ("stargate_up", "Stargate"),
        ("vcenter_up", "vCenter"),
        ("prism_up", "Prism"),
        ("fio_up", "fio (per VM)"),
    ):
        try:
            res = stack.query(q)
        except requests.RequestException:
            continue
        if res:
            res.sort(
                key=lambda r: (
                    r["metric"].get(label, ""),
                    r["metric"].get("vm", ""),
                    r["metric"].get("instance", ""),
                )
            )
            ups = ", ".join(
                f"{where(r['metric'])}{r['metric'].get('vm') or r['metric'].get('instance', '?')}={r['value'][1]}"
                for r in res
            )
            lines.append(f"  {what} probes: {ups}")
    lines.append("")
    lines.extend(_where_to_look(stack, label))
    lines.append("")
    lines.append("The PoC report (verdicts per VM disk, the three views per disk, one HTML file; docs/report.md):")
    if stack.named_clusters:
        for c in stack.named_clusters:
            lines.append(
                f"  .venv/bin/ioparallax-report --prometheus {stack.urls['prometheus']} --start -30m "
                f"--match '{{{label}=\"{c}\"}}' -o report-{c}.html"
            )
    else:
        lines.append(f"  make report REPORT_PROMETHEUS={stack.urls['prometheus']}   (writes .run/report.html)")
        lines.append(
            f"  .venv/bin/ioparallax-report --prometheus {stack.urls['prometheus']} --start -30m "
            "-o report.html --pdf report.pdf"
        )
    lines.append("")
    if "victoria-metrics" in stack.urls:
        lines.extend(long_term_lines(stack.urls["victoria-metrics"], stack.long_term_rows()))
        lines.append("")
    alerts = stack.alerts()
    firing = [a for a in alerts if a["state"] == "firing"]
    pending = [a for a in alerts if a["state"] == "pending"]
    lines.append(f"Firing alerts: {len(firing)}{_per_cluster_counts(stack, firing, label)}")
    lines.extend(f"  {alert_line(a, label)}" for a in firing)
    if pending:
        lines.append(
            f"Pending alerts: {len(pending)}{_per_cluster_counts(stack, pending, label)} (they fire once "
            "their condition has held for the rule's `for`; new firings are printed below as they happen)"
        )
        lines.extend(f"  {alert_line(a, label)}" for a in pending)
    lines.append("")
    lines.append(stack.dashboards_report())
    return "\n".join(lines)


def _per_cluster_counts(stack: Stack, alerts: list[dict[str, Any]], label: str) -> str:
    """' (poc-a: 3, poc-b: 0)' for a stack of several clusters, '' for one."""
    if not stack.named_clusters:
        return ""
    return (
        " ("
        + ", ".join(f"{c}: {sum(1 for a in alerts if a['labels'].get(label) == c)}" for c in stack.named_clusters)
        + ")"
    )


def _where_to_look(stack: Stack, label: str) -> list[str]:
    """Links to Prometheus' graph page; every by/on keeps the cluster label (ioparallax/mixin/cluster.py), so
    two clusters' equal vdisk ids stay apart."""
    from ioparallax.mixin.cluster import per_cluster

    looks = [
        (
            "storage: zero share of reads per vdisk",
            'sum by (vdisk_id) (stargate_vdisk_read_source_bytes_per_second{source=~"zero|estore_zero|oplog_zero"})'
            " / sum by (vdisk_id) (stargate_vdisk_read_source_bytes_per_second)",
        ),
        (
            "VM: the latest sample (vCenter 20 s, Prism 30 s) beside the true average",
            "vcenter_virtual_disk_sample_write_bytes_per_second or rate(vcenter_virtual_disk_write_bytes_total[1m])"
            " or prism_virtual_disk_sample_write_bytes_per_second or rate(prism_virtual_disk_write_bytes_total[1m])",
        ),
        (
            "VM: where each VM disk's VM view comes from (vcenter, prism) and its sample period",
            "vm_disk:ioparallax_vm_source:info * on (vm, disk) group_left () "
            "vm_disk:ioparallax_vm_sample_interval:seconds",
        ),
        ("guest: fio hygiene findings", "fio_job_hygiene_problem == 1"),
        (
            "guest: DiskSPD and vdbench hygiene findings",
            "diskspd_target_hygiene_problem == 1 or vdbench_run_hygiene_problem == 1",
        ),
        ("guest: which tool measured each VM disk", "vm_disk:ioparallax_guest_tool:info"),
        (
            "all three views: bytes/s per VM disk (guest = fio/DiskSPD/vdbench, vm = vCenter or Prism, storage = Stargate)",
            '{__name__=~"vm_disk:ioparallax_(guest|vm|storage)_(read|write)_bytes:(rate|avg)1m"}',
        ),
        (
            "guest: the tool's ops beside the guest OS's requests (node_exporter: 1 MiB I/O is split in two; "
            "windows_exporter: counted once)",
            '{__name__=~"vm_disk:ioparallax_guest(_os)?_(read|write)_ops:rate1m"}',
        ),
        (
            "all three views: op-weighted latency per VM disk",
            '{__name__=~"vm_disk:ioparallax_(guest|vm|storage)_(read|write)_latency_seconds:(mean|avg)1m"}',
        ),
    ]
    if stack.named_clusters:
        looks += [
            (
                "the comparison: each cluster's guest and storage bytes/s, summed over its VM disks",
                'sum by (__name__) ({__name__=~"vm_disk:ioparallax_(guest|storage)_(read|write)_bytes:(rate|avg)1m"})',
            ),
            (
                "the comparison: each cluster's mean guest write latency over its VM disks",
                "avg by () (vm_disk:ioparallax_guest_write_latency_seconds:mean1m)",
            ),
        ]
    lines = ["Where to look (Prometheus graph):"]
    for what, q in looks:
        q = per_cluster(q, label)
        lines.append(f"  {what}:\n    {stack.urls['prometheus']}/graph?g0.expr={quote(q)}&g0.tab=0")
    return lines


def dashboards_status(stack: Stack) -> str:
    """How many of the dashboards' queries return data now, for the first VM disk that all three
    views know (what Grafana would show with the variables on it), per cluster."""
    from ioparallax.mixin.queries import dashboard_coverage

    blocks = []
    clusters: list[str | None] = [*stack.named_clusters] or [None]
    for cluster in clusters:
        at = f"cluster {cluster}, " if cluster else ""
        try:
            cov = dashboard_coverage(
                stack.query,
                rate_interval="1m",
                interval=stack.scrape_interval,
                cluster=cluster,
                cluster_label=stack.cluster_label,
            )
        except (requests.RequestException, OSError, ValueError, KeyError) as exc:
            blocks.append(f"Dashboards ({at.rstrip(', ')}): could not run their queries: {exc}")
            continue
        if cov is None:
            blocks.append(
                f"Dashboards ({at}no VM disk is known to all three views yet: the identity joins need a few scrapes)"
            )
            continue
        ahv = any(p.ahv for p in stack.clusters if p.cluster == cluster)
        blocks.append(_coverage_lines(cov, at, ahv))
    return "\n".join(blocks)


def _coverage_lines(cov: Any, at: str, ahv: bool = False) -> str:
    from ioparallax.mixin.vmview import vcenter_only

    v = cov.values
    lines = [
        f"Dashboards (dashboards/*.json, {at}for {v['vm']} {v['disk']}, vdisk {v['vdisk']}): "
        f"{cov.with_data} of {cov.total} queries return data now"
    ]
    if cov.left_out:
        lines.append(
            f"  {cov.left_out} application-view queries (the density dashboard) left out: no application "
            "runs in this scenario (docs/pgbench.md)"
        )
    empty = cov.empty
    if ahv:
        # Outstanding I/Os, I/O size samples and seeks are vCenter's only: no data on AHV by design.
        only = [e for e in empty if vcenter_only(e.expr)]
        empty = [e for e in empty if not vcenter_only(e.expr)]
        if only:
            lines.append(
                f"  {len(only)} vCenter-only queries (outstanding I/Os, I/O size samples, seeks) "
                "have no Prism counterpart on this AHV cluster (esxtop's 2 s view included: ESXi hosts only)"
            )
    for e in empty[:10]:
        lines.append(f"  no data yet: {e.where}")
    if len(empty) > 10:
        lines.append(f"  ... and {len(empty) - 10} more")
    if empty:
        lines.append("  (a direction this disk does not do, an alert that has not fired, or 1m windows still filling)")
    return "\n".join(lines)


def _hypervisor(part: ClusterPart) -> str:
    return "AHV, VM view from Prism" if part.ahv else "ESXi, VM view from vCenter"


def alert_line(a: dict[str, Any], cluster_label: str = "cluster") -> str:
    lab = a["labels"]
    where = ", ".join(f"{k}={lab[k]}" for k in (cluster_label, "vm", "disk", "vdisk_id", "job") if k in lab)
    return f"{lab.get('severity', ''):8} {lab['alertname']}  {where}"


def long_term_lines(store_url: str, rows: float | None = None) -> list[str]:
    """The demo report's lines for the long-term store (Debian's build has no web UI, vmui: its
    Prometheus-compatible API is what Grafana, the report and curl query)."""
    q = '{__name__=~"vm_disk:ioparallax_(guest|vm|storage)_(read|write)_bytes:(rate|avg)1m"}'
    return [
        "Where to look (long-term store: VictoriaMetrics, remote_write target of Prometheus, raw and recorded series;",
        "its Prometheus-compatible API is a Grafana Prometheus data source URL; the last 30 s are not served yet):",
        f"  query URL (Grafana data source): {store_url}",
        f"  all three views, as stored long-term:\n    {store_url}/api/v1/query?query={quote(q)}",
        f"  samples received so far: {'unknown' if rows is None else f'{rows:,.0f}'} "
        f'({store_url}/metrics, vm_rows_inserted_total{{type="promremotewrite"}})',
    ]
