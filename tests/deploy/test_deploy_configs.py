"""The deployment files users run: docker-compose.yml, Prometheus and Alertmanager configs.

No Docker engine runs here, so the compose file is validated with Debian's `docker-compose config`
(which resolves variables, profiles and anchors exactly as `up` would), and the configs it mounts
with promtool and amtool.
"""

import os
import subprocess
from urllib.parse import urlsplit

import pytest
import yaml

from tests.support import REPO


def compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("GRAFANA_ADMIN_PASSWORD", "SCENARIO")}
    return subprocess.run(
        ["docker-compose", *args], cwd=REPO, capture_output=True, text=True, timeout=60, env={**base, **(env or {})}
    )


@pytest.fixture(scope="module")
def demo_config():
    res = compose("--profile", "demo", "config", env={"GRAFANA_ADMIN_PASSWORD": "s3cret"})
    assert res.returncode == 0, res.stderr
    return yaml.safe_load(res.stdout)


def test_compose_is_valid_and_the_demo_profile_adds_the_simulators(demo_config):
    # docker-compose 1.29 prints every service with its `profiles`; `up` without --profile starts
    # only those without one.
    always = {name for name, svc in demo_config["services"].items() if not svc.get("profiles")}
    assert always == {
        "prometheus",
        "alertmanager",
        "grafana",
        "node-exporter",
        "stargate-exporter",
        "vcenter-exporter",
        "prism-exporter",
        "fio-exporter",
        "diskspd-exporter",
        "vdbench-exporter",
        "pgbench-exporter",
        "esxtop-exporter",
    }
    demo = {name for name, svc in demo_config["services"].items() if "demo" in svc.get("profiles", [])}
    assert demo == {
        "stargate-simulator",
        "vcenter-simulator",
        "prism-simulator",
        "guest-simulator",
        "esxtop-simulator",
        "fio-exporter-bench-01",
        "fio-exporter-bench-02",
        "node-exporter-bench-01",
        "node-exporter-bench-02",
    }


def test_grafana_has_no_default_password():
    res = compose("config", "-q")
    assert res.returncode != 0
    assert "GRAFANA_ADMIN_PASSWORD" in res.stderr


def test_grafana_password_comes_from_the_environment(demo_config):
    env = demo_config["services"]["grafana"]["environment"]
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == "s3cret"
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


def test_every_image_is_pinned(demo_config):
    for name, svc in demo_config["services"].items():
        image = svc.get("image", "")
        assert image, f"{name} has no image name"
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest", f"{name}: image {image!r} is not pinned to a version"


def test_published_ports_are_loopback_only(demo_config):
    for name, svc in demo_config["services"].items():
        for port in svc.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} on every interface"


def test_mounted_files_exist(demo_config):
    for name, svc in demo_config["services"].items():
        for vol in svc.get("volumes", []):
            source = vol["source"] if isinstance(vol, dict) else vol.split(":")[0]
            if source.startswith(str(REPO)):
                assert os.path.exists(source), f"{name} mounts missing {source}"


def test_prometheus_config_is_valid():
    res = subprocess.run(
        ["promtool", "check", "config", "--syntax-only", str(REPO / "deploy/prometheus/prometheus.yml")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_prometheus_targets_files_are_file_sd_lists():
    for path in (REPO / "deploy/prometheus/targets").glob("*.yml"):
        groups = yaml.safe_load(path.read_text())
        assert isinstance(groups, list) and all(g["targets"] for g in groups), path


def test_alertmanager_config_is_valid():
    res = subprocess.run(
        ["amtool", "check-config", str(REPO / "deploy/alertmanager/alertmanager.yml")], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_compose_prometheus_loads_the_generated_rules_and_grafana_the_dashboards(demo_config):
    prom = demo_config["services"]["prometheus"]
    assert "--enable-feature=extra-scrape-metrics" in prom["command"]  # IoparallaxScrapeSlow needs it
    mounts = {
        (v["source"] if isinstance(v, dict) else v.split(":")[0]): (
            v["target"] if isinstance(v, dict) else v.split(":")[1]
        )
        for v in prom["volumes"]
    }
    rules_dir = mounts[str(REPO / "alerts")]
    cfg = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    patterns = [p for p in cfg["rule_files"] if p.startswith(rules_dir + "/")]
    assert patterns, f"prometheus.yml loads no rules from the mounted {rules_dir}"
    loaded = {p.name for pat in patterns for p in (REPO / "alerts").glob(pat[len(rules_dir) + 1 :])}
    assert loaded == {"ioparallax.rules.yml", "ioparallax-alerts.rules.yml"}
    grafana = demo_config["services"]["grafana"]
    gmounts = {
        (v["source"] if isinstance(v, dict) else v.split(":")[0]): (
            v["target"] if isinstance(v, dict) else v.split(":")[1]
        )
        for v in grafana["volumes"]
    }
    provider = yaml.safe_load((REPO / "deploy/grafana/provisioning/dashboards/ioparallax.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert gmounts[str(REPO / "dashboards")] == path
    assert len(list((REPO / "dashboards").glob("*.json"))) >= 5


def test_demo_guests_are_the_default_scenarios_vms_and_prometheus_scrapes_them(demo_config):
    from ioparallax.simulators.scenario import load_scenario

    vms = {vm.name for vm in load_scenario("zero-heavy").vms}
    guests = {
        name.removeprefix("fio-exporter-") for name in demo_config["services"] if name.startswith("fio-exporter-")
    }
    assert guests == vms
    for vm in vms:
        cmd = demo_config["services"][f"fio-exporter-{vm}"]["command"]
        assert f"--fio.host={vm}" in cmd and f"--fio.watch=/var/lib/guests/{vm}/fio-status.json" in cmd
    targets = yaml.safe_load((REPO / "deploy/prometheus/targets/fio.yml").read_text())
    labelled = {g["labels"]["vm"]: g["targets"][0] for g in targets if g.get("labels")}
    assert labelled == {vm: f"fio-exporter-{vm}:9763" for vm in vms}
    # each guest's node_exporter reads that guest's simulated procfs, with the same `vm` label
    for vm in vms:
        cmd = demo_config["services"][f"node-exporter-{vm}"]["command"]
        assert f"--path.procfs=/var/lib/guests/{vm}/proc" in cmd and "--collector.diskstats" in cmd
    node_targets = yaml.safe_load((REPO / "deploy/prometheus/targets/guest-node.yml").read_text())
    assert {g["labels"]["vm"]: g["targets"][0] for g in node_targets} == {vm: f"node-exporter-{vm}:9100" for vm in vms}
    jobs = {
        j["job_name"]: j
        for j in yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())["scrape_configs"]
    }
    assert jobs["guest-node"]["file_sd_configs"][0]["files"] == ["/etc/prometheus/targets/guest-node.yml"]


def test_prism_is_probed_through_the_exporter_and_only_at_listed_targets(demo_config):
    """The prism job: multi-target relabelling to the compose exporter's port; every Prism in its
    file_sd file is a target the exporter's config lists (else HTTP 400), and the demo's is the
    simulator's listen address; the exporter's config loads with the compose environment."""
    from ioparallax.exporters.prism.address import target_key
    from ioparallax.exporters.prism.config import load_config

    services = demo_config["services"]
    cfg = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    job = jobs["prism"]
    assert job["metrics_path"] == "/probe"
    [file_sd] = job["file_sd_configs"]
    assert file_sd["files"] == ["/etc/prometheus/targets/prism.yml"]
    relabel = job["relabel_configs"]
    assert relabel[0] == {"source_labels": ["__address__"], "target_label": "__param_target"}
    assert relabel[1] == {"source_labels": ["__param_target"], "target_label": "instance"}
    exporter = services["prism-exporter"]
    listen = [c for c in exporter["command"] if c.startswith("--web.listen-address=")][0].rsplit(":", 1)[1]
    assert relabel[2] == {"target_label": "__address__", "replacement": f"prism-exporter:{listen}"}
    assert f"prism-exporter:{listen}" in jobs["ioparallax-exporters"]["static_configs"][0]["targets"]
    assert job["scrape_timeout"] < job["scrape_interval"]
    # The exporter's config, as compose mounts it, with the compose environment.
    [config_flag] = [c for c in exporter["command"] if c.startswith("--config.file=")]
    source = {target: src for src, target in mounts(exporter).items()}[config_flag.split("=", 1)[1]]
    config = load_config(source, env={k: str(v) for k, v in exporter["environment"].items()})
    assert not config.allow_unlisted
    groups = yaml.safe_load((REPO / "deploy/prometheus/targets/prism.yml").read_text())
    targets = [t for g in groups for t in g["targets"]]
    for t in targets:
        assert config.target(target_key(t)) is not None, f"{t} is not listed in deploy/exporters/prism.yml"
    # The demo's target is the simulator, on the port it listens on, with the exporter's credentials.
    sim = services["prism-simulator"]
    assert sim["profiles"] == ["demo"]
    sim_listen = [c for c in sim["command"] if c.startswith("--listen=")][0].split("=", 1)[1]
    assert f"prism-simulator:{sim_listen.rsplit(':', 1)[1]}" in targets
    assert f"--username={exporter['environment']['PRISM_USERNAME']}" in sim["command"]
    assert "--password-env=PRISM_PASSWORD" in sim["command"]
    assert sim["environment"]["PRISM_PASSWORD"] == exporter["environment"]["PRISM_PASSWORD"]
    # Only the simulator opts out of TLS.
    for key, t in config.targets.items():
        assert (t.scheme == "http") == key.startswith("prism-simulator"), key


def test_the_image_holds_every_package_the_project_installs():
    import tomllib

    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    dockerfile = (REPO / "Dockerfile").read_text()
    for pattern in include:
        package = pattern.rstrip("*")
        assert f"COPY {package} ./{package}" in dockerfile, f"the image lacks {package}/ (pip install . would skip it)"


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "ioparallax/simulators/vcenter/Dockerfile"])
def test_dockerfile_copies_only_what_the_context_has_and_all_that_pip_install_needs(dockerfile):
    """No Docker engine here: what a build would fail on is checked on the text. Both images are
    built from the repository root (docker-compose.yml's context): every COPY source exists there
    (the glob too), and an image that runs `pip install .` copies the files pyproject.toml makes
    setuptools read (readme, license-files) and the package."""
    import glob
    import shlex
    import tomllib

    text = (REPO / dockerfile).read_text()
    copies = [shlex.split(line)[1:] for line in text.splitlines() if line.startswith("COPY ")]
    sources: list[str] = []
    for args in copies:
        if any(a.startswith("--from=") for a in args):
            continue
        for src in args[:-1]:
            assert glob.glob(str(REPO / src)), f"{dockerfile}: COPY {src}: not in the build context"
            sources.append(src)
    if "pip install" in text:
        project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
        # ioparallax/shipped/ holds links to folders of the repository (alerts/, dashboards/): a
        # build that lacks their targets installs a package without the rules and dashboards.
        links = {str(p.resolve().relative_to(REPO)) for p in (REPO / "ioparallax").rglob("*") if p.is_symlink()}
        assert {"alerts", "dashboards"} <= links, links
        needed = {"pyproject.toml", project["readme"], *project["license-files"], "ioparallax", *links}
        assert needed <= set(sources), f"{dockerfile}: pip install . needs {sorted(needed - set(sources))}"


# --- the long-term profile: VictoriaMetrics as Prometheus' remote_write target ----------------

LONG_TERM_ENV = {"GRAFANA_ADMIN_PASSWORD": "s3cret", "PROMETHEUS_CONFIG": "prometheus-long-term.yml"}


@pytest.fixture(scope="module")
def long_term_config():
    res = compose("--profile", "long-term", "config", env=LONG_TERM_ENV)
    assert res.returncode == 0, res.stderr
    return yaml.safe_load(res.stdout)


def mounts(svc: dict) -> dict[str, str]:
    return {
        (v["source"] if isinstance(v, dict) else v.split(":")[0]): (
            v["target"] if isinstance(v, dict) else v.split(":")[1]
        )
        for v in svc.get("volumes", [])
    }


def flag(command: list[str], name: str) -> str:
    [value] = [c.split("=", 1)[1] for c in command if c.startswith(f"-{name}=")]
    return value


def test_the_long_term_profile_adds_victoria_metrics_with_its_data_in_a_volume(long_term_config):
    services = long_term_config["services"]
    assert {name for name, svc in services.items() if "long-term" in svc.get("profiles", [])} == {"victoria-metrics"}
    vm = services["victoria-metrics"]
    data = flag(vm["command"], "storageDataPath")
    assert mounts(vm)["victoria-metrics-data"] == data, "VictoriaMetrics' data must outlive the container"
    assert "victoria-metrics-data" in long_term_config["volumes"]
    assert int(flag(vm["command"], "retentionPeriod")) >= 1  # months


def test_compose_victoria_metrics_is_the_line_the_e2e_test_runs(long_term_config):
    """The image's version is Debian's package line (1.79), whose MetricsQL the e2e test compares
    with Prometheus (tests/e2e/test_e2e_long_term.py)."""
    image = long_term_config["services"]["victoria-metrics"]["image"]
    repo, _, tag = image.rpartition(":")
    assert repo == "victoriametrics/victoria-metrics" and tag.startswith("v1.79."), image
    res = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "victoria-metrics"], capture_output=True, text=True)
    assert res.returncode == 0, "Debian's victoria-metrics is not installed: `make deps` installs it"
    assert res.stdout.startswith("1.79."), res.stdout


def test_prometheus_writes_to_victoria_metrics_under_the_long_term_profile(long_term_config, demo_config):
    prom_mounts = {target: source for source, target in mounts(long_term_config["services"]["prometheus"]).items()}
    assert prom_mounts["/etc/prometheus/prometheus.yml"] == str(REPO / "deploy/prometheus/prometheus-long-term.yml")
    # without the variable, the plain config (no remote_write)
    plain = {target: source for source, target in mounts(demo_config["services"]["prometheus"]).items()}
    assert plain["/etc/prometheus/prometheus.yml"] == str(REPO / "deploy/prometheus/prometheus.yml")
    cfg = yaml.safe_load((REPO / "deploy/prometheus/prometheus-long-term.yml").read_text())
    [rw] = cfg["remote_write"]
    url = urlsplit(rw["url"])
    port = flag(long_term_config["services"]["victoria-metrics"]["command"], "httpListenAddr").rsplit(":", 1)[1]
    assert (url.scheme, url.hostname, str(url.port), url.path) == ("http", "victoria-metrics", port, "/api/v1/write")
    # raw and recorded series alike: nothing dropped on the way
    assert "write_relabel_configs" not in rw


def test_the_long_term_prometheus_config_is_prometheus_yml_plus_remote_write():
    base = yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())
    long_term = yaml.safe_load((REPO / "deploy/prometheus/prometheus-long-term.yml").read_text())
    assert "remote_write" not in base
    assert {k: v for k, v in long_term.items() if k != "remote_write"} == base, (
        "deploy/prometheus/prometheus-long-term.yml must be prometheus.yml plus remote_write: copy the change over"
    )
    res = subprocess.run(
        ["promtool", "check", "config", "--syntax-only", str(REPO / "deploy/prometheus/prometheus-long-term.yml")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_grafana_offers_victoria_metrics_as_a_data_source(long_term_config):
    sources = yaml.safe_load((REPO / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())[
        "datasources"
    ]
    [vm] = [s for s in sources if s["name"] == "VictoriaMetrics"]
    port = flag(long_term_config["services"]["victoria-metrics"]["command"], "httpListenAddr").rsplit(":", 1)[1]
    assert vm["type"] == "prometheus" and vm["url"] == f"http://victoria-metrics:{port}"
    assert [s["name"] for s in sources if s.get("isDefault")] == ["Prometheus"]


def test_esxtop_job_scrapes_the_exporter_that_follows_the_simulated_and_copied_captures(demo_config):
    """The esxtop job reaches the compose exporter on its listen port, as often as esxtop writes
    (-d 2: the burst rules' max_over_time needs every sample); the exporter watches the directory
    the demo's simulator writes into (the shared volume) and the one users copy captures into."""
    services = demo_config["services"]
    exporter, simulator = services["esxtop-exporter"], services["esxtop-simulator"]
    listen = [c for c in exporter["command"] if c.startswith("--web.listen-address=")][0].rsplit(":", 1)[1]
    jobs = {
        j["job_name"]: j
        for j in yaml.safe_load((REPO / "deploy/prometheus/prometheus.yml").read_text())["scrape_configs"]
    }
    job = jobs["esxtop"]
    assert job["static_configs"][0]["targets"] == [f"esxtop-exporter:{listen}"]
    assert job["scrape_interval"] == "2s" and job["scrape_timeout"] <= job["scrape_interval"]
    watched = {c.split("=", 1)[1] for c in exporter["command"] if c.startswith("--esxtop.watch=")}
    [out] = [c.split("=", 1)[1] for c in simulator["command"] if c.startswith("--out=")]
    assert out in watched
    assert mounts(simulator)["esxtop-demo"] == out and mounts(exporter)["esxtop-demo"] == out
    assert mounts(exporter)[str(REPO / "esxtop-results")] in watched
