"""dashboard_coverage (the demo's "N of M queries return data") picks its VM disk by the configured
cluster label, per cluster, and substitutes $cluster with that cluster."""

from __future__ import annotations

from ioparallax.mixin.queries import dashboard_coverage, joined_vm_disks


def fake_prometheus(label: str):
    asked: list[str] = []
    joined = [{"metric": {label: c, "vm": "bench-01", "disk": "scsi0:1"}} for c in ("poc-b", "poc-a")]

    def query(promql: str) -> list[dict]:
        asked.append(promql)
        if promql == joined_vm_disks(label):
            return joined
        if promql.startswith("vdisk:ioparallax_vdisk:info{"):
            cluster = promql.split(f'{label}="', 1)[1].split('"', 1)[0]
            return [{"metric": {"vdisk_id": {"poc-a": "1000", "poc-b": "2000"}[cluster]}}]
        return []

    return query, asked


def test_the_configured_label_names_the_cluster():
    assert joined_vm_disks("site").count("by (site, vm, disk)") == 3
    assert "cluster" not in joined_vm_disks("site")
    assert joined_vm_disks("").count("by (vm, disk)") == 3
    query, asked = fake_prometheus("site")
    cov = dashboard_coverage(query, cluster_label="site", dashboards={})
    assert cov.values["cluster"] == "poc-a" and cov.values["vdisk"] == "1000"  # the first, sorted
    cov = dashboard_coverage(query, cluster_label="site", cluster="poc-b", dashboards={})
    assert cov.values["cluster"] == "poc-b" and cov.values["vdisk"] == "2000"
    assert 'vdisk:ioparallax_vdisk:info{site="poc-b",vm="bench-01",disk="scsi0:1"}' in asked
    assert dashboard_coverage(query, cluster_label="site", cluster="poc-c", dashboards={}) is None


def test_panel_queries_get_the_clusters_value():
    query, asked = fake_prometheus("cluster")
    model = {"panels": [{"title": "t", "targets": [{"refId": "A", "expr": 'up{cluster=~"$cluster",vm=~"$vm"}'}]}]}
    cov = dashboard_coverage(query, cluster_label="cluster", cluster="poc-b", dashboards={"d.json": model})
    assert cov.total == 1 and asked[-1] == 'up{cluster=~"poc-b",vm=~"bench-01"}'


def test_the_application_view_is_left_out_where_no_application_runs():
    """The density dashboard is empty by design without an application: its queries are left out
    of the count (said apart), not counted as missing; with an application they count."""
    query, asked = fake_prometheus("cluster")
    model = {
        "panels": [
            {"title": "io", "targets": [{"refId": "A", "expr": 'up{cluster=~"$cluster",vm=~"$vm"}'}]},
            {
                "title": "app",
                "targets": [{"refId": "A", "expr": 'vm_app:ioparallax_app_transactions:rate1m{vm=~"$vm"}'}],
            },
            {"title": "runs", "targets": [{"refId": "A", "expr": 'pgbench_run_info{job="pgbench"}'}]},
        ]
    }
    cov = dashboard_coverage(query, cluster_label="cluster", cluster="poc-b", dashboards={"d.json": model})
    assert (cov.total, cov.left_out, [e.where for e in cov.empty]) == (1, 2, ["d.json / io / A"])
    assert 'vm_app:ioparallax_app_transactions:rate1m{cluster="poc-b"}' in asked

    def with_app(promql: str) -> list[dict]:
        return [{"metric": {}}] if promql.startswith("vm_app:") else query(promql)

    cov = dashboard_coverage(with_app, cluster_label="cluster", cluster="poc-b", dashboards={"d.json": model})
    assert (cov.total, cov.left_out) == (3, 0)
