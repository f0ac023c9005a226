"""The generated rules: committed files are what the config gives, promtool accepts them, every
alert group has its promtool unit tests with cases that fire and cases that stay silent, and the
config reports its errors by file and key."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from ioparallax.mixin.cli import main as mixin_main
from ioparallax.mixin.cluster import groupings, per_cluster
from ioparallax.mixin.config import DEFAULT_CONFIG, load_config, parse_config
from ioparallax.mixin.rules.alerts import alert_groups
from ioparallax.mixin.rules.files import rule_files
from ioparallax.mixin.rules.recording import recording_rules
from ioparallax.yamlconf import ConfigError

REPO = Path(__file__).resolve().parents[3]
ALERTS = REPO / "alerts"
TESTS = ALERTS / "tests"


def test_committed_rule_files_are_what_the_config_generates():
    generated = rule_files(load_config(), "ioparallax/mixin/config.yml")
    assert sorted(generated) == sorted(p.name for p in ALERTS.glob("*.rules.yml"))
    for name, text in generated.items():
        assert (ALERTS / name).read_text() == text, f"alerts/{name} is stale: run `make rules`"
    assert mixin_main(["rules", "--check"]) == 0


def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    mixin_main(["rules", "--out", str(tmp_path)])
    path = tmp_path / "ioparallax-alerts.rules.yml"
    path.write_text(path.read_text().replace("> 0.1\n", "> 0.2\n", 1))
    assert mixin_main(["rules", "--out", str(tmp_path), "--check"]) == 1
    assert "ioparallax-alerts.rules.yml is not what" in capsys.readouterr().err


def test_promtool_accepts_the_generated_rules():
    res = subprocess.run(
        ["promtool", "check", "rules", *map(str, sorted(ALERTS.glob("*.rules.yml")))], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    alerts = sum(len(g.rules) for g in alert_groups(load_config()))
    assert f"SUCCESS: {alerts} rules found" in res.stdout


def _split_groups(text: str) -> tuple[str, list[str]]:
    """A promtool test file as its head (rule_files, evaluation_interval, ``tests:``) and the text of
    each test group, verbatim: head + one group is a test file that runs that group alone."""
    head, sep, body = text.partition("\ntests:\n")
    first, *groups = re.split(r"(?m)^(?=  - name: )", body)
    return head + sep + first, groups


# promtool (2.42, no --run) runs the groups of a file one after the other in one thread: one process
# per group lets the xdist workers share views-alerts.test.yml (about a third of the rules' test time).
GROUPS = [
    (path, i) for path in sorted(TESTS.glob("*.test.yml")) for i in range(len(_split_groups(path.read_text())[1]))
]


def test_the_promtool_files_split_into_their_groups_whole():
    for path in TESTS.glob("*.test.yml"):
        text = path.read_text()
        head, groups = _split_groups(text)
        assert head + "".join(groups) == text, path.name
        names = [g["name"] for g in yaml.safe_load(text)["tests"]]
        assert [yaml.safe_load(head + g)["tests"][0]["name"] for g in groups] == names, path.name
        assert all(len(yaml.safe_load(head + g)["tests"]) == 1 for g in groups), path.name


@pytest.mark.parametrize(("test_file", "group"), GROUPS, ids=lambda v: v.name if isinstance(v, Path) else str(v))
def test_promtool_unit_tests(test_file, group, tmp_path):
    # The group's file beside links to the rule files, so that its rule_files (../) resolve as in alerts/.
    for rules in ALERTS.glob("*.rules.yml"):
        (tmp_path / rules.name).symlink_to(rules)
    (tmp_path / "tests").mkdir()
    head, groups = _split_groups(test_file.read_text())
    (tmp_path / "tests" / test_file.name).write_text(head + groups[group])
    res = subprocess.run(
        ["promtool", "test", "rules", test_file.name], cwd=tmp_path / "tests", capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def _unit_cases() -> dict[str, tuple[int, int]]:
    """alertname -> (cases where it fires, cases where it must stay silent), over all test files."""
    out: dict[str, list[int]] = {}
    for path in TESTS.glob("*.test.yml"):
        for group in yaml.safe_load(path.read_text())["tests"]:
            assert group.get("name"), f"{path.name}: every test group has a name saying what it proves"
            for case in group.get("alert_rule_test", []):
                counts = out.setdefault(case["alertname"], [0, 0])
                counts[0 if case.get("exp_alerts") else 1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def test_every_alert_has_a_test_group_file_and_cases_that_fire_and_stay_silent():
    groups = alert_groups(load_config())
    files = {p.name for p in TESTS.glob("*.test.yml")}
    for g in groups:
        assert f"{g.name.removeprefix('ioparallax-')}.test.yml" in files, f"no promtool test file for {g.name}"
    cases = _unit_cases()
    for g in groups:
        for rule in g.rules:
            fires, silent = cases.get(rule.alert, (0, 0))
            assert fires >= 1, f"{rule.alert}: no promtool case where it fires"
            assert silent >= 1, f"{rule.alert}: no promtool case where it must stay silent"


def test_alerts_follow_the_house_rules():
    runbook = (REPO / "docs" / "runbook.md").read_text()
    for g in alert_groups(load_config()):
        for rule in g.rules:
            assert rule.alert.startswith("Ioparallax") and rule.alert[0].isupper()
            assert rule.labels["severity"] in ("critical", "warning", "info")
            assert set(rule.annotations) == {"summary", "description", "runbook_url"}
            assert "{{" not in rule.annotations["summary"], "summary is static"
            assert "{{" in rule.annotations["description"], f"{rule.alert}: description is not templated"
            # the runbook has a section whose anchor the annotation points at
            assert f"## {rule.alert}" in runbook, f"docs/runbook.md has no section for {rule.alert}"


def test_recording_rules_are_named_level_metric_operation_and_commented():
    names = set()
    for g in recording_rules(load_config()):
        for rule in g.rules:
            level, metric, op = rule.record.split(":")
            assert level and metric.startswith(("ioparallax_",)) and op, rule.record
            assert rule.comment and len(rule.comment) > 20
            assert rule.record not in names, f"{rule.record} recorded twice"
            names.add(rule.record)
    text = (ALERTS / "ioparallax.rules.yml").read_text()
    # a comment line stands before every rule in the file
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("- record:"):
            assert lines[i - 1].strip().startswith("#"), f"no comment before {line.strip()}"


def test_rules_use_only_rules_defined_earlier_or_exporter_metrics():
    # A recording rule used by another must be recorded before it (within the file's groups order)
    # so the chain settles in one evaluation; an alert may use any recorded name.
    recorded: list[str] = []
    for g in recording_rules(load_config()):
        for rule in g.rules:
            for name in recorded_names_in(rule.expr):
                assert name in recorded, f"{rule.record} uses {name} before it is recorded"
            recorded.append(rule.record)
    for g in alert_groups(load_config()):
        for rule in g.rules:
            for name in recorded_names_in(rule.expr):
                assert name in recorded, f"{rule.alert} uses {name}, which no rule records"


def recorded_names_in(expr: str) -> set[str]:
    import re

    return set(re.findall(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b", expr))


def test_the_config_drives_thresholds_selectors_and_windows():
    cfg = load_config(
        overrides={
            "thresholds": {"zero_read_ratio": 0.25},
            "windows": {"rate": "30s"},
            "selectors": {"stargate": 'job="cvm"'},
        }
    )
    text = rule_files(cfg)["ioparallax-alerts.rules.yml"] + rule_files(cfg)["ioparallax.rules.yml"]
    assert "vdisk:ioparallax_read_zero:ratio > 0.25" in text
    assert "vm_disk:ioparallax_guest_read_bytes:rate30s" in text and ":rate1m" not in text
    assert 'stargate_vdisk_info{job="cvm"}' in text and 'job="stargate"' not in text


def test_the_node_selector_picks_the_guests_node_exporter_and_defaults_when_absent():
    text = rule_files(load_config(overrides={"selectors": {"node": 'job="guest-os"'}}))["ioparallax.rules.yml"]
    assert 'rate(node_disk_writes_completed_total{job="guest-os"}[1m])' in text and 'job="guest-node"' not in text
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    del data["selectors"]["node"]  # a config from before the guest OS view
    assert parse_config(data, "old.yml").selectors.node == 'job="guest-node"'


@pytest.mark.parametrize(
    "patch, key",
    [
        ({"thresholds": {"zero_read_ratio": 1.5}}, "thresholds.zero_read_ratio"),
        ({"windows": {"rate": "five minutes"}}, "windows.rate"),
        ({"windows": {"rate": "1m1h"}}, "windows.rate"),  # promtool rejects it (units largest first)
        ({"for": {"zero_heavy": "1.5m"}}, "for.zero_heavy"),  # no decimals in Prometheus' grammar
        ({"windows": {"agreement": "30s"}}, "windows.agreement"),
        ({"selectors": {"fio": "job=fio"}}, "selectors.fio"),
        ({"for": {"zero_heavy": 300}}, "for.zero_heavy"),
        ({"thresholds": {"zero_reads": 0.1}}, "thresholds.zero_reads"),
        ({"thresholds": {"asked_to_implied_iodepth_ratio": 0.5}}, "thresholds.asked_to_implied_iodepth_ratio"),
        ({"dashboards": {"uid_prefix": "has spaces"}}, "dashboards.uid_prefix"),
    ],
)
def test_config_errors_name_the_file_and_the_key(tmp_path, patch, key):
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for section, values in patch.items():
        data[section].update(values)
    path = tmp_path / "mixin.yml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value) and key in str(err.value)


OVERRIDE_TESTS = Path(__file__).resolve().parent / "promtool"


def test_asked_queue_depth_alert_has_its_own_threshold_defaulting_to_the_burst_one():
    # Its own key, shipped at 5 like burstiness_ratio, so the committed rules are as before.
    t = load_config().thresholds
    assert t.asked_to_implied_iodepth_ratio == 5 == t.burstiness_ratio
    cfg = load_config(overrides={"thresholds": {"asked_to_implied_iodepth_ratio": 10}})
    rules = {r.alert: r.expr for g in alert_groups(cfg) for r in g.rules}
    assert "vm_disk:ioparallax_asked_to_implied_iodepth:ratio1m > 10\n" in rules["IoparallaxAskedQueueDepthNotReached"]
    assert "vm_disk:ioparallax_burstiness:ratio1m > 5\n" in rules["IoparallaxBurstAveragedAway"]


def test_promtool_asked_queue_depth_at_a_non_default_threshold(tmp_path):
    # The rules generated with the override, next to a copy of the promtool file that expects it: a
    # buffered disk at ratio 8 silent, one at 12 firing; the burst alert still judges at 5.
    from ioparallax.mixin.rules.files import write_rule_files

    cfg = load_config(overrides={"thresholds": {"asked_to_implied_iodepth_ratio": 10}})
    write_rule_files(cfg, tmp_path)
    name = "asked-queue-depth-threshold.test.yml"
    (tmp_path / name).write_text((OVERRIDE_TESTS / name).read_text())
    res = subprocess.run(["promtool", "test", "rules", name], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout
    # The same file fails against the shipped threshold (5): the ratio-8 buffered disk fires there.
    write_rule_files(load_config(), tmp_path)
    res = subprocess.run(["promtool", "test", "rules", name], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode != 0 and "buf8-01" in res.stdout + res.stderr, res.stdout + res.stderr


def _all_rules(cfg) -> list:
    return [r for g in recording_rules(cfg) + alert_groups(cfg) for r in g.rules]


@pytest.mark.parametrize("label", ["cluster", "k8s_cluster"])
def test_every_grouping_and_join_keeps_the_cluster_label(label):
    # Two clusters' equal vdisk ids and VM names must never be summed or joined together: every
    # by (...) and on (...) starts with the label (the two-cluster promtool cases prove the effect).
    cfg = load_config(overrides={"cluster_label": label})
    seen = 0
    for rule in _all_rules(cfg):
        for kind, labels in groupings(rule.expr):
            assert labels[0] == label and labels.count(label) == 1, (rule.record or rule.alert, kind, labels)
            seen += 1
    assert seen > 100


def test_without_a_cluster_label_the_rules_are_unchanged_by_it():
    cfg = load_config(overrides={"cluster_label": ""})
    text = "".join(rule_files(cfg).values())
    assert "cluster," not in text and "(cluster" not in text
    assert "max by (vdisk_id, vm, disk)" in text


def test_per_cluster_adds_the_label_once_and_leaves_ignoring_and_group_left_alone():
    expr = "sum by (vm, disk) (a * on (vdisk_id) group_left (vm, disk) b) / ignoring (x) group_left () c"
    once = per_cluster(expr, "cluster")
    assert once == (
        "sum by (cluster, vm, disk) (a * on (cluster, vdisk_id) group_left (vm, disk) b) / ignoring (x) group_left () c"
    )
    assert per_cluster(once, "cluster") == once
    assert per_cluster("count by () (up)", "cluster") == "count by (cluster) (up)"


def test_the_runbook_url_may_be_an_absolute_pattern():
    url = "https://git.example.com/poc/ioparallax/-/blob/main/docs/runbook.md#%s"
    cfg = load_config(overrides={"alerts": {"runbook_url": url}})
    urls = {r.alert: r.annotations["runbook_url"] for g in alert_groups(cfg) for r in g.rules}
    assert urls["IoparallaxAskedQueueDepthNotReached"] == url.replace("%s", "ioparallaxaskedqueuedepthnotreached")
    assert all(u.startswith("https://") and "%s" not in u for u in urls.values())
    with pytest.raises(ConfigError, match="alerts.runbook_url: at most one %s"):
        load_config(overrides={"alerts": {"runbook_url": "https://x/%s/%s"}})


@pytest.mark.parametrize("value", ["has space", "1cluster", "cluster-name"])
def test_a_bad_cluster_label_is_a_config_error_naming_the_key(tmp_path, value):
    data = yaml.safe_load(DEFAULT_CONFIG.read_text())
    data["cluster_label"] = value
    path = tmp_path / "mixin.yml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="cluster_label: expected a Prometheus label name") as err:
        load_config(path)
    assert str(path) in str(err.value)


def test_cli_reports_a_config_error_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "bad.yml"
    path.write_text("selectors: [not, a, mapping]\n")
    assert mixin_main(["--config", str(path), "rules", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "bad.yml: selectors: expected a mapping" in err


def test_windows_take_the_whole_prometheus_grammar():
    # The agreement check compares the windows in seconds with the same grammar that validated them
    # (it used the exporters' parser, which did not take 1h30m: a ValueError without file or key).
    cfg = load_config(overrides={"windows": {"rate": "90s", "agreement": "1h30m"}})
    assert (cfg.windows.rate, cfg.windows.agreement) == ("90s", "1h30m")
    assert "[1h30m]" in "".join(rule_files(cfg).values())
    with pytest.raises(ConfigError, match="windows.agreement: must be at least windows.rate"):
        load_config(overrides={"windows": {"rate": "1d", "agreement": "23h59m"}})


def test_parse_config_requires_every_section():
    with pytest.raises(ConfigError, match="windows: is required"):
        parse_config({"selectors": {"stargate": "", "vcenter": "", "fio": "", "exporters": ""}}, "x.yml")


def test_every_metric_name_in_the_rules_is_exposed_by_an_exporter(exposed_names):
    # Raw series in the rules always carry the configured selector (`name{job=...}`); recorded
    # names are checked above. What is left must come from a real exporter's exposition.
    from tests.expositions import PROMETHEUS_NAMES
    from tests.mixin.dashboards.promql import metric_names

    exposed = set().union(*exposed_names.values()) | PROMETHEUS_NAMES
    used: dict[str, str] = {}
    for g in recording_rules(load_config()) + alert_groups(load_config()):
        for rule in g.rules:
            for name in metric_names(rule.expr):
                if ":" not in name:
                    used.setdefault(name, rule.record or rule.alert)
    missing = {n: where for n, where in used.items() if n not in exposed}
    assert not missing, f"names no exporter exposes: {missing}"
    for source in ("stargate", "vcenter", "prism", "fio", "node", "windows", "diskspd", "vdbench", "pgbench", "esxtop"):
        assert used.keys() & exposed_names[source], f"no rule reads the {source} view"
    # the VM view from either manager: every vCenter counter a rule reads has its Prism counterpart read too
    assert {
        "prism_virtual_disk_samples_total",
        "prism_virtual_disk_info",
        "prism_virtual_disk_read_ops_total",
        "prism_up",
    } <= used.keys()
    assert {
        "fio_guest_partition_aligned",
        "vcenter_virtual_disk_samples_total",
        "stargate_vdisk_read_source_bytes_per_second",
        "vcenter_vm_guest_disk_info",
        "windows_physical_disk_split_ios_total",
    } <= used.keys()
