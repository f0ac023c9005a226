"""How the demo stack names several clusters and merges their scrape jobs (ioparallax/simulators/stack/),
without starting anything (no ``e2e`` marker); tests/e2e/test_e2e_two_clusters.py runs them."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from ioparallax.simulators.stack import Stack
from ioparallax.simulators.stack.clusters import cluster_specs
from ioparallax.simulators.stack.scrape import EXPORTER_LABEL, merge_jobs, probe_scrape
from tests.support import REPO


def test_scenarios_are_comma_separated_or_repeated_with_optional_cluster_names():
    assert cluster_specs(["zero-heavy,clean-oltp@poc-b", "misaligned"]) == [
        ("zero-heavy", None),
        ("clean-oltp", "poc-b"),
        ("misaligned", None),
    ]
    assert cluster_specs(["a.yaml@x_1.y"]) == [("a.yaml", "x_1.y")]


@pytest.mark.parametrize(
    "values, message",
    [
        (["zero-heavy@"], "the cluster name after @"),
        (["zero-heavy@a/b"], "'a/b'"),
        ([","], "no scenario given"),
    ],
)
def test_bad_scenario_lists_name_the_cause(values, message):
    with pytest.raises(ValueError, match=message):
        cluster_specs(values)


def test_clusters_are_named_after_their_scenario_unless_named(tmp_path):
    stack = Stack(scenarios=["zero-heavy,clean-oltp@poc-b"], workdir=tmp_path, cluster_label="cluster")
    parts = stack._cluster_parts()
    assert [(p.cluster, p.trace.scenario.name) for p in parts] == [
        ("zero-heavy", "zero-heavy"),
        ("poc-b", "clean-oltp"),
    ]
    assert parts[0].proc("stargate-exporter") == "zero-heavy.stargate-exporter"
    assert parts[1].labels("cluster", vm="oltp-01") == {"cluster": "poc-b", "vm": "oltp-01"}
    assert parts[1].workdir == tmp_path / "clusters" / "poc-b"
    # one scenario, no name: the stack of one cluster, unlabelled, as before
    (one,) = Stack(scenario="zero-heavy", workdir=tmp_path, cluster_label="cluster")._cluster_parts()
    assert one.cluster is None and one.labels("cluster", vm="x") == {"vm": "x"} and one.proc("p") == "p"
    assert one.workdir == tmp_path


def test_a_cluster_name_used_twice_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"a second cluster named 'zero-heavy'.*scenario@cluster"):
        Stack(scenarios=["zero-heavy", "zero-heavy"], workdir=tmp_path)._cluster_parts()
    parts = Stack(scenarios=["zero-heavy@a,zero-heavy@b"], workdir=tmp_path)._cluster_parts()
    assert [p.cluster for p in parts] == ["a", "b"]


def test_one_job_per_source_holds_every_clusters_targets(tmp_path):
    a = probe_scrape("stargate", "http://127.0.0.1:1", ["127.0.0.1:11"], labels={"cluster": "a"})
    b = probe_scrape("stargate", "http://127.0.0.1:2", ["127.0.0.1:21", "127.0.0.1:22"], labels={"cluster": "b"})
    fio = {"job_name": "fio", "static_configs": [{"targets": ["127.0.0.1:3"], "labels": {"vm": "v"}}]}
    jobs = merge_jobs([a, fio, b])
    assert [j["job_name"] for j in jobs] == ["stargate", "fio"]
    assert jobs[0]["static_configs"] == [
        {"targets": ["127.0.0.1:11"], "labels": {"cluster": "a", EXPORTER_LABEL: "127.0.0.1:1"}},
        {"targets": ["127.0.0.1:21", "127.0.0.1:22"], "labels": {"cluster": "b", EXPORTER_LABEL: "127.0.0.1:2"}},
    ]
    assert a["static_configs"] == [
        {"targets": ["127.0.0.1:11"], "labels": {"cluster": "a", EXPORTER_LABEL: "127.0.0.1:1"}}
    ]
    # Prometheus accepts it (the e2e test proves each group is probed through its own exporter)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump({"scrape_configs": jobs}))
    check = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def demo_command(workdir, scenario: str) -> subprocess.CompletedProcess:
    """The demo's command line with ``--scenario scenario``, run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "ioparallax.simulators.stack.cli", "--scenario", scenario, "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_demo_refuses_a_bad_scenario_list_before_starting_anything(tmp_path):
    r = demo_command(tmp_path, "zero-heavy@")
    assert r.returncode == 2 and "the cluster name after @" in r.stderr, r.stderr
    assert not (tmp_path / "logs").exists()


def test_without_a_cluster_label_only_one_unnamed_cluster_runs(tmp_path):
    (one,) = Stack(scenario="zero-heavy", workdir=tmp_path, cluster_label="")._cluster_parts()
    assert one.cluster is None
    for scenarios in (["zero-heavy,clean-oltp"], ["zero-heavy@poc-a"]):
        with pytest.raises(ValueError, match="cluster_label is ''"):
            Stack(scenarios=scenarios, workdir=tmp_path, cluster_label="")._cluster_parts()


def test_demo_names_an_unknown_scenario_before_starting_anything(tmp_path):
    r = demo_command(tmp_path, "zero-heavy,no-such-scenario")
    assert r.returncode == 2 and "no scenario named 'no-such-scenario'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "logs").exists()


def test_rule_files_come_from_rules_dir(tmp_path):
    # Tests load rules generated with other windows; the demo loads the repository's alerts/.
    (tmp_path / "short.rules.yml").write_text("groups: []\n")
    (tmp_path / "notes.md").write_text("not a rule file\n")
    extra = tmp_path / "extra.yml"
    assert Stack(rules_dir=tmp_path, extra_rule_files=[extra]).rule_files() == [tmp_path / "short.rules.yml", extra]
    shipped = Stack().rule_files()
    assert shipped and all(p.parent.name == "alerts" and p.name.endswith(".rules.yml") for p in shipped)
