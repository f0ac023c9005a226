"""The generated dashboards: committed bytes, uids, variables, units and descriptions, every
PromQL expression parsed by promtool, and every metric name produced by an exporter or a
recording rule."""

from __future__ import annotations

import json
import re

from ioparallax.mixin.cluster import groupings
from ioparallax.mixin.config import load_config
from ioparallax.mixin.dashboards.build import BUILDERS, build_dashboards, render, write_dashboards
from tests.support import REPO

from .promql import (
    SAMPLE_VARS,
    bare_identifiers,
    expressions,
    label_values_selector,
    metric_names,
    panels,
    promtool_parse,
    rate_calls,
    rule_names,
    substitute,
)

DASHBOARDS = REPO / "dashboards"
EXPECTED_UIDS = {
    "ioparallax-overview",
    "ioparallax-three-views",
    "ioparallax-vdisk",
    "ioparallax-fio",
    "ioparallax-vcenter",
    "ioparallax-density",
}
# Series Prometheus itself makes: the scrape's up, and ALERTS from the alerting rules.
PROMETHEUS_OWN = {"up", "ALERTS"}


def test_committed_dashboards_are_what_the_generator_writes(tmp_path, cfg):
    written = write_dashboards(cfg, tmp_path)
    assert sorted(p.name for p in written) == sorted(BUILDERS)
    committed = sorted(p.name for p in DASHBOARDS.glob("*.json"))
    assert committed == sorted(BUILDERS), "dashboards/ holds exactly the generated files"
    for path in written:
        assert path.read_bytes() == (DASHBOARDS / path.name).read_bytes(), (
            f"dashboards/{path.name} is stale: run `make dashboards` (ioparallax-mixin dashboards) and commit"
        )


def test_generation_is_deterministic(cfg):
    a = {k: render(v) for k, v in build_dashboards(cfg).items()}
    b = {k: render(v) for k, v in build_dashboards(load_config()).items()}
    assert a == b
    text = a["ioparallax-overview.json"]
    assert text.endswith("}\n") and text.startswith('{\n  "')
    assert json.loads(text) == json.loads(json.dumps(json.loads(text), sort_keys=True))


def test_uids_are_stable_unique_and_follow_the_prefix(dashboards):
    uids = [m["uid"] for m in dashboards.values()]
    assert set(uids) == EXPECTED_UIDS and len(uids) == len(set(uids))
    other = build_dashboards(load_config(overrides={"dashboards": {"uid_prefix": "poc7"}}))
    assert {m["uid"] for m in other.values()} == {u.replace("ioparallax", "poc7", 1) for u in EXPECTED_UIDS}


def test_tags_refresh_and_time_come_from_the_config(dashboards):
    other = build_dashboards(
        load_config(overrides={"dashboards": {"tags": ["poc", "storage"], "refresh": "30s", "time_from": "now-3h"}})
    )
    for m in dashboards.values():
        assert m["tags"] == ["ioparallax"] and m["refresh"] == "10s" and m["time"] == {"from": "now-30m", "to": "now"}
    for m in other.values():
        assert m["tags"] == ["poc", "storage"] and m["refresh"] == "30s" and m["time"]["from"] == "now-3h"


def test_one_variable_vocabulary_on_every_dashboard(dashboards):
    for fname, m in dashboards.items():
        variables = {v["name"]: v for v in m["templating"]["list"]}
        assert list(variables) == ["datasource", "cluster", "vm", "disk", "vdisk"], fname
        ds = variables["datasource"]
        assert ds["type"] == "datasource" and ds["query"] == "prometheus" and ds["current"]["value"] == "Prometheus"
        # $cluster starts on All (.*), which also matches series without the label (one cluster)
        # the VM disks of either manager (vCenter on ESXi, Prism on AHV), as the rules record them
        assert (
            variables["cluster"]["query"]
            == 'label_values(vm_disk:ioparallax_vm_source:info{vm_source=~"vcenter|prism"}, cluster)'
        )
        assert variables["cluster"]["current"]["value"] == ["$__all"] and variables["cluster"]["allValue"] == ".*"
        assert (
            label_values_selector(variables["vm"]["query"])
            == 'vm_disk:ioparallax_vm_source:info{cluster=~"$cluster",vm_source=~"vcenter|prism"}'
        )
        assert (
            label_values_selector(variables["disk"]["query"])
            == 'vm_disk:ioparallax_vm_source:info{cluster=~"$cluster",vm_source=~"vcenter|prism",vm=~"$vm"}'
        )
        assert (
            variables["vdisk"]["query"]
            == 'label_values(stargate_vdisk_info{cluster=~"$cluster",job="stargate",vm=~"$vm",disk=~"$disk"}, vdisk_id)'
        )
        for name in ("cluster", "vm", "disk", "vdisk"):
            assert variables[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_every_query_selects_the_cluster_and_keeps_it_in_every_grouping(dashboards):
    for e in expressions(dashboards):
        if e.where.endswith("variable cluster"):
            continue
        for name in metric_names(e.expr):
            assert re.search(re.escape(name) + r'\{cluster=~"\$cluster"[,}]', e.expr), (e.where, name)
        for kind, labels in groupings(e.expr):
            assert labels[0] == "cluster", (e.where, kind, labels)


def test_without_a_cluster_label_the_dashboards_have_no_cluster_variable_nor_grouping(tmp_path):
    cfg = load_config(overrides={"cluster_label": ""})
    models = build_dashboards(cfg)
    for fname, m in models.items():
        assert [v["name"] for v in m["templating"]["list"]] == ["datasource", "vm", "disk", "vdisk"], fname
    text = json.dumps(models)
    assert "cluster" not in text.replace("Cluster", "")


def test_every_panel_has_a_unit_a_description_and_the_datasource_variable(dashboards):
    counted = 0
    for fname, m in dashboards.items():
        for p in panels(m):
            if p["type"] == "row":
                continue
            assert p.get("description", "").strip(), f"{fname}: panel {p.get('title')!r} has no description"
            if p["type"] == "text":
                # A text panel has no query, so no value to give a unit: it must have content.
                assert len(p["options"]["content"]) > 100, p["title"]
                continue
            counted += 1
            assert p["fieldConfig"]["defaults"].get("unit"), f"{fname}: panel {p['title']!r} has no unit"
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert p["targets"], p["title"]
            for t in p["targets"]:
                assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert counted >= 60


def test_panel_ids_are_unique_and_panels_fit_the_grid(dashboards):
    for fname, m in dashboards.items():
        ids = [p["id"] for p in panels(m)]
        assert len(ids) == len(set(ids)), fname
        for p in panels(m):
            g = p["gridPos"]
            assert 0 <= g["x"] and g["x"] + g["w"] <= 24, (fname, p["title"], g)


def test_every_rate_uses_rate_interval(dashboards):
    calls = 0
    for e in expressions(dashboards):
        for arg in rate_calls(e.expr):
            calls += 1
            windows = re.findall(r"\[([^\]]*)\]", arg)
            assert windows == ["$__rate_interval"], f"{e.where}: rate({arg})"
    assert calls >= 20
    # And no other literal range window slipped in (recording rules own the fixed windows).
    for e in expressions(dashboards):
        assert set(re.findall(r"\[([^\]]*)\]", e.expr)) <= {"$__rate_interval"}, e.where


def test_rate_check_catches_a_fixed_window():
    assert re.findall(r"\[([^\]]*)\]", rate_calls('sum(rate(x{a="b"}[5m]))')[0]) == ["5m"]


def test_every_expression_parses_with_variables_substituted(dashboards, tmp_path):
    exprs = expressions(dashboards)
    assert len(exprs) >= 100
    substituted = [substitute(e.expr) for e in exprs]
    for e, s in zip(exprs, substituted):
        assert "$" not in s.replace('"$1"', ""), f"{e.where}: unsubstituted variable in {s}"
    res = promtool_parse(substituted, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(substituted)} rules found" in res.stdout


def test_promtool_parse_rejects_a_broken_expression(tmp_path):
    res = promtool_parse(["sum by (vm) (rate(x[1m])", "up"], tmp_path)
    assert res.returncode != 0 and "dashboard:expr_0:check" in res.stdout + res.stderr


def test_substitution_keeps_label_replace_references():
    assert (
        substitute('label_replace(x{vm=~"$vm"}, "d", "$1", "f", "(.+)")[${__rate_interval}]')
        == 'label_replace(x{vm=~"bench-01"}, "d", "$1", "f", "(.+)")[1m]'
    )
    assert SAMPLE_VARS["__rate_interval"] == "1m"


def test_every_selector_carries_matchers(dashboards):
    # What makes metric_names() complete: a bare metric name would be left over here.
    for e in expressions(dashboards):
        assert not bare_identifiers(e.expr), f"{e.where}: bare identifiers {bare_identifiers(e.expr)}"
    assert bare_identifiers('sum(rate(foo{a="b"}[1m])) / on (a) bar') == {"bar"}
    assert bare_identifiers("sum by (a) (rate(foo[1m]))") == {"foo"}


def test_every_metric_name_is_exposed_by_an_exporter_or_recorded_by_a_rule(dashboards, exposed_names):
    rule_files = sorted((REPO / "alerts").glob("*.rules.yml"))
    recorded = rule_names(rule_files)
    assert recorded, "alerts/*.rules.yml define no recording rules yet"
    exposed = set().union(*exposed_names.values())
    used: dict[str, list[str]] = {}
    for e in expressions(dashboards):
        for name in metric_names(e.expr):
            used.setdefault(name, []).append(e.where)
    missing = {n: w[0] for n, w in used.items() if n not in exposed | recorded | PROMETHEUS_OWN}
    assert not missing, f"metric names no exporter exposes and no rule records: {missing}"
    # Every view is on the dashboards, each through names its exporter really exposes.
    for source in ("stargate", "vcenter", "prism", "fio", "esxtop"):
        assert used.keys() & exposed_names[source], source
    assert len(used.keys() & recorded) >= 20


def test_vcenter_rates_span_several_20s_samples(dashboards):
    # vCenter counters step once per 20 s sample, Prism's once per 30 s: a rate over Grafana's
    # default $__rate_interval (4 x the 5 s scrape interval = 20 s) would hold one step or none. The
    # Min step makes $__rate_interval at least 4 samples of the slowest source the query reads.
    seen = prism = 0
    for fname, m in dashboards.items():
        for p in panels(m):
            for t in p.get("targets", []) or []:
                args = rate_calls(t["expr"])
                where = f"{fname} / {p['title']} / {t['refId']}"
                if any("prism_" in arg for arg in args):
                    prism += 1
                    assert t.get("interval") == "30s", where
                elif any("vcenter_" in arg for arg in args):
                    seen += 1
                    assert t.get("interval") == "20s", where
    assert seen >= 3 and prism >= 10, (seen, prism)


def _drop_empty_custom(x):
    if isinstance(x, dict):
        return {k: _drop_empty_custom(v) for k, v in x.items() if not (k == "custom" and v == {})}
    if isinstance(x, list):
        return [_drop_empty_custom(v) for v in x]
    return x


def test_committed_json_reads_back_as_the_sdk_dashboard_model():
    # The Grafana 11.6 schema as the SDK knows it: every field of the committed JSON is read into
    # the typed model and written back unchanged (the SDK adds only empty `custom` objects).
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    for path in sorted(DASHBOARDS.glob("*.json")):
        model = json.loads(path.read_text())
        back = json.loads(json.dumps(Dashboard.from_json(model), cls=JSONEncoder))
        assert _drop_empty_custom(back) == model, path.name
        assert model["schemaVersion"] == 41, "a Grafana 11.6 dashboard"


def test_rule_names_follow_the_configured_window(tmp_path):
    # Another rate window renames the rules (`...:rate2m`); the dashboards generated from the same
    # config use exactly the names the rules generated from it record.
    from ioparallax.mixin.rules.files import write_rule_files

    cfg = load_config(overrides={"windows": {"rate": "2m", "agreement": "10m"}})
    write_rule_files(cfg, tmp_path)
    recorded = rule_names(sorted(tmp_path.glob("*.rules.yml")))
    used = {n for e in expressions(build_dashboards(cfg)) for n in metric_names(e.expr) if ":" in n}
    assert used and used <= recorded, sorted(used - recorded)
    assert any(n.endswith(":rate2m") for n in used) and not any(n.endswith("1m") for n in used)
