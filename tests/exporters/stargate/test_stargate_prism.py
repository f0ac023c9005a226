"""vdisk -> VM/disk names from Prism's v2 virtual_disks API, against the simulator's Prism endpoint
(which requires basic auth here, as real Prism does): the happy path through the exporter, the
YAML merge, and every failure path (bad credentials, HTTP 500, garbage, slow, refused, TLS), none
of which may fail a probe or print the password."""

import logging
import time

import pytest
import requests

from ioparallax.exporters.common.web.server import ExporterServer
from ioparallax.exporters.stargate.cli import make_app
from ioparallax.exporters.stargate.config import load_config
from ioparallax.exporters.stargate.prism import PrismConfig, VDiskNames, prism_config, virtual_disks
from ioparallax.simulators.stargate import pages
from ioparallax.simulators.stargate.server import StargateCluster
from ioparallax.yamlconf import ConfigError, Section
from tests.exporters.stargate.test_stargate_exporter import one, samples, sim_ports
from tests.support import late_allowance

FROZEN = 1_700_000_000.0
USER, PASSWORD = "monitor", "pr1sm-s3cret-pw"


@pytest.fixture(scope="module")
def cluster():
    with StargateCluster("zero-heavy", clock=lambda: FROZEN, prism_auth=(USER, PASSWORD)) as c:
        yield c


@pytest.fixture(autouse=True)
def no_faults(cluster):
    cluster.clear_faults()
    yield
    cluster.clear_faults()


def names_for(cluster, cvm="cvm-1", password=PASSWORD, **kw) -> VDiskNames:
    cfg = PrismConfig(url=cluster.urls[cvm], username=USER, password=password, **kw)
    return VDiskNames({}, cfg)


def expected(cluster):
    """vdisk id -> (vdisk uuid, vm, disk address, VM disk uuid) from the scenario itself."""
    return {
        str(d.vdisk_id): (d.vdisk_uuid, d.vm, pages.disk_address(d), d.uuid.lower()) for d in cluster.scenario.disks
    }


def scrape(server, target, timeout="4"):
    r = requests.get(
        server.url + "/probe",
        params={"target": target, "discover": "true"},
        headers={"X-Prometheus-Scrape-Timeout-Seconds": timeout},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return r.text


def vm_labels(text):
    return {dict(k)["vdisk_id"]: (dict(k)["vm"], dict(k)["disk"]) for k in samples(text, "stargate_vdisk_info")}


def disk_uuids(text):
    return {dict(k)["vdisk_id"]: dict(k)["disk_uuid"] for k in samples(text, "stargate_vdisk_info")}


def test_prism_names_reach_vdisk_info_and_yaml_wins(cluster):
    names = names_for(cluster)
    names.yaml = {"1001": {"vm": "hand-mapped", "disk": "scsi0:7", "disk_uuid": ""}}
    srv = ExporterServer(make_app(8, names, 5.0, discovery_ports=sim_ports(cluster)), "127.0.0.1", 0).start()
    try:
        text = scrape(srv, cluster.urls["cvm-1"].split("://")[1])
    finally:
        srv.stop()
    truth = expected(cluster)
    assert one(text, "stargate_up") == 1 and one(text, "stargate_prism_up") == 1
    labels = vm_labels(text)
    assert labels["1000"] == (truth["1000"][1], truth["1000"][2]) == ("bench-01", "scsi.1")
    assert disk_uuids(text)["1000"] == truth["1000"][3]  # Prism's device_uuid: vCenter's disk UUID
    assert labels["1001"] == ("hand-mapped", "scsi0:7")  # the hand mapping wins over Prism
    assert disk_uuids(text)["1001"] == ""
    assert set(labels) == set(truth)


def test_lookup_joins_by_uuid_and_by_id_only_without_uuid(cluster):
    names = names_for(cluster)
    assert names.refresh() is True
    uuid, vm, disk, disk_uuid = expected(cluster)["1000"]
    want = {"vm": vm, "disk": disk, "disk_uuid": disk_uuid}
    assert names.lookup("1000", uuid.upper()) == want
    assert names.lookup("1000", "") == want  # row without a UUID: by id
    # Another cluster's vdisk with the same id but its own UUID is not labelled.
    assert names.lookup("1000", "00000000-0000-0000-0000-000000000000") == {}


def assert_no_password(caplog):
    assert PASSWORD not in caplog.text


@pytest.mark.parametrize(
    "mode, kw, cause",
    [
        ("http_500", {}, "HTTP 500"),
        ("garbage", {}, "not JSON"),
        ("truncated", {}, "not JSON"),
        ("slow", {"delay": 3}, "within 1.0s"),
    ],
)
def test_prism_faults_keep_the_mapping_and_are_logged_once(cluster, caplog, mode, kw, cause):
    names = names_for(cluster, timeout=1.0)
    assert names.refresh() is True and names.prism_up
    uuid, vm, disk, disk_uuid = expected(cluster)["1000"]
    cluster.set_fault("cvm-1", mode, only="prism", **kw)
    caplog.set_level(logging.DEBUG, logger="ioparallax.exporters.stargate.prism")
    assert names.refresh() is False
    assert names.prism_up is False
    assert names.lookup("1000", uuid) == {"vm": vm, "disk": disk, "disk_uuid": disk_uuid}, "the mapping stays as it was"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and cause in warnings[0] and "keeping the mapping" in warnings[0], warnings
    names.refresh()  # the same cause again: not a second warning
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert_no_password(caplog)
    cluster.clear_faults()
    assert names.refresh() is True and names.prism_up


def test_wrong_password_is_named_not_printed(cluster, caplog):
    names = names_for(cluster, password="wrong-" + PASSWORD)
    caplog.set_level(logging.DEBUG)
    assert names.refresh() is False
    assert "HTTP 401 from /PrismGateway/services/rest/v2.0/virtual_disks: the credentials were refused" in caplog.text
    assert "YAML mapping only" in caplog.text
    assert names.lookup("1000", expected(cluster)["1000"][0]) == {}
    assert PASSWORD not in caplog.text and "wrong-" not in caplog.text


def test_no_proxy_or_netrc_from_the_environment_sees_the_credentials(cluster, canary, monkeypatch, tmp_path):
    """The environment's proxy and ~/.netrc are not the user's Prism: the request goes straight to
    the URL the config names, with only the credentials it names (before: through HTTP_PROXY, the
    Authorization header included)."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, f"http://{canary.address}")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login intruder password netrc-secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    names = names_for(cluster)
    assert names.refresh() is True and names.prism_up
    assert canary.connections() == []
    # Without a username in the config, no credentials at all (not the netrc's): refused.
    anonymous = VDiskNames({}, PrismConfig(url=cluster.urls["cvm-1"]))
    assert anonymous.refresh() is False
    assert canary.connections() == []


def test_refused_prism_never_fails_the_probe(cluster, caplog):
    # Prism on cvm-3, which refuses connections (it hosts no vdisk); the probe reads cvm-1 and -2.
    names = names_for(cluster, cvm="cvm-3")
    names.yaml = {"1000": {"vm": "from-yaml", "disk": ""}}
    cluster.set_fault("cvm-3", "refused")
    caplog.set_level(logging.WARNING)
    srv = ExporterServer(make_app(8, names, 5.0, discovery_ports=sim_ports(cluster)), "127.0.0.1", 0).start()
    try:
        text = scrape(srv, cluster.urls["cvm-1"].split("://")[1])
    finally:
        srv.stop()
    assert one(text, "stargate_up") == 1 and one(text, "stargate_prism_up") == 0
    labels = vm_labels(text)
    assert labels.pop("1000") == ("from-yaml", "")
    assert labels and set(labels.values()) == {("", "")}  # YAML-only: the others unnamed
    assert "connection refused" in caplog.text and "YAML mapping only" in caplog.text
    assert_no_password(caplog)


def _probe_seconds(cluster, names, cvm: str, timeout: str) -> tuple[str, float]:
    srv = ExporterServer(make_app(8, names, 5.0, discovery_ports=sim_ports(cluster)), "127.0.0.1", 0).start()
    try:
        start = time.monotonic()
        text = scrape(srv, cluster.urls[cvm].split("://")[1], timeout=timeout)
        return text, time.monotonic() - start
    finally:
        srv.stop()


def test_slow_prism_does_not_hold_the_probe_past_its_deadline(cluster):
    # What a whole first probe (Prism read included) costs on this machine now, Prism answering.
    text, quick = _probe_seconds(cluster, names_for(cluster, timeout=10.0), "cvm-1", "2")
    assert one(text, "stargate_prism_up") == 1
    cluster.set_fault("cvm-1", "slow", delay=4, only="prism")
    text, elapsed = _probe_seconds(cluster, names_for(cluster, timeout=10.0), "cvm-1", "2")
    # By the 2 s scrape timeout, late by at most what a probe costs here (0.5 s on a quiet
    # machine), and always before Prism's 4 s answer.
    assert elapsed < 2.0 + min(late_allowance(quick), 1.5), (elapsed, quick)
    assert one(text, "stargate_up") == 1 and one(text, "stargate_prism_up") == 0
    assert vm_labels(text)["1000"] == ("", "")


def test_tls_to_a_plain_http_port_is_a_logged_tls_error(cluster, caplog):
    https = cluster.urls["cvm-1"].replace("http://", "https://")
    names = VDiskNames({}, PrismConfig(url=https, username=USER, password=PASSWORD))
    caplog.set_level(logging.WARNING)
    assert names.refresh() is False
    assert "TLS error" in caplog.text and "insecure_skip_verify: true" in caplog.text
    assert_no_password(caplog)


def test_refresh_interval_caches_the_inventory(cluster):
    now = [100.0]
    cfg = PrismConfig(url=cluster.urls["cvm-1"], username=USER, password=PASSWORD, refresh_interval=300)
    names = VDiskNames({}, cfg, clock=lambda: now[0])
    assert names.stale()
    assert names.refresh()
    before = cluster.request_counts.get(("cvm-1", "/PrismGateway/services/rest/v2.0/virtual_disks"), 0)
    now[0] += 299
    assert not names.stale() and names.start_refresh_if_stale() is None
    now[0] += 1
    assert names.stale()
    t = names.start_refresh_if_stale()
    t.join(5)
    assert cluster.request_counts[("cvm-1", "/PrismGateway/services/rest/v2.0/virtual_disks")] == before + 1


def test_config_section(tmp_path):
    env = {"PRISM_PASSWORD": PASSWORD, "PRISM_USERNAME": USER}
    cfg = prism_config(
        Section(
            {"url": "10.0.0.10", "username_env": "PRISM_USERNAME", "password_env": "PRISM_PASSWORD"}, "x.yml", "prism"
        ),
        env,
    )
    assert cfg.url == "https://10.0.0.10:9440" and cfg.insecure_skip_verify is False
    assert cfg.username == USER and cfg.password == PASSWORD
    assert PASSWORD not in repr(cfg)
    assert cfg.timeout == 5.0 and cfg.refresh_interval == 300.0 and cfg.page_size == 500
    off = prism_config(
        Section({"url": "https://p:9440", "insecure_skip_verify": True, "refresh_interval": "1m"}, "x.yml", "prism")
    )
    assert off.insecure_skip_verify is True and off.refresh_interval == 60.0
    # tls_verify is the documented alias, with the opposite meaning
    alias = prism_config(Section({"url": "https://p:9440", "tls_verify": False}, "x.yml", "prism"))
    assert alias.insecure_skip_verify is True
    on = prism_config(Section({"url": "https://p:9440", "tls_verify": True}, "x.yml", "prism"))
    assert on.insecure_skip_verify is False
    with pytest.raises(
        ConfigError, match=r"x.yml: prism.tls_verify: tls_verify: true contradicts insecure_skip_verify: true"
    ):
        prism_config(Section({"url": "p", "insecure_skip_verify": True, "tls_verify": True}, "x.yml", "prism"))
    with pytest.raises(ConfigError, match=r"x.yml: prism.ca_file: makes no sense with insecure_skip_verify: true"):
        prism_config(Section({"url": "p", "tls_verify": False, "ca_file": __file__}, "x.yml", "prism"))
    with pytest.raises(ConfigError, match=r"x.yml: prism.password_env: environment variable NOPE is not set"):
        prism_config(Section({"url": "p", "username": "u", "password_env": "NOPE"}, "x.yml", "prism"), {})
    with pytest.raises(ConfigError, match=r"prism.ca_file: no such file"):
        prism_config(Section({"url": "p", "ca_file": str(tmp_path / "missing.pem")}, "x.yml", "prism"))
    with pytest.raises(ConfigError, match=r"prism.url: no credentials in the URL"):
        prism_config(Section({"url": "https://admin:pw@p:9440"}, "x.yml", "prism"))
    with pytest.raises(ConfigError, match=r"x.yml: prism.page_size: expected 1-10000, got 0"):
        prism_config(Section({"url": "p", "page_size": 0}, "x.yml", "prism"))
    with pytest.raises(ConfigError, match=r"prism.tls_verfy: unknown key"):
        prism_config(Section({"url": "p", "tls_verfy": False}, "x.yml", "prism"))
    f = tmp_path / "stargate.yml"
    f.write_text('prism: {url: "https://p:9440", username: u, password: pw}\nvdisks:\n  "1000": {vm: a}\n')
    both = load_config(str(f))
    assert both.prism.endpoint == "https://p:9440/PrismGateway/services/rest/v2.0/virtual_disks"
    assert both.vdisks == {"1000": {"vm": "a", "disk": "", "disk_uuid": ""}}


def test_exporter_process_reads_prism_credentials_from_env_and_never_logs_them(cluster, tmp_path):
    from tests.support import ManagedProcess, free_port, venv_tool, wait_for_http

    cfg = tmp_path / "stargate.yml"
    cfg.write_text(
        f"prism:\n  url: {cluster.urls['cvm-2']}\n  username_env: SG_PRISM_USER\n"
        "  password_env: SG_PRISM_PASSWORD\n  timeout: 2s\n"
        f"targets: [127.0.0.1]\ndiscovery_ports: {list(sim_ports(cluster))}\n"
    )
    port = free_port()
    proc = ManagedProcess(
        "stargate-exporter",
        [
            venv_tool("stargate-exporter"),
            f"--web.listen-address=127.0.0.1:{port}",
            f"--config.file={cfg}",
            "--log.level=debug",
        ],
        tmp_path,
        env={"SG_PRISM_USER": USER, "SG_PRISM_PASSWORD": PASSWORD},
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", proc=proc)
        r = requests.get(
            f"http://127.0.0.1:{port}/probe",
            params={"target": cluster.urls["cvm-1"], "discover": "true"},
            headers={"X-Prometheus-Scrape-Timeout-Seconds": "5"},
            timeout=30,
        )
        assert one(r.text, "stargate_prism_up") == 1
        assert vm_labels(r.text)["1000"] == ("bench-01", "scsi.1")
        cluster.set_fault("cvm-2", "http_500", only="prism")
        # Refreshed only after refresh_interval (5m): the next probe keeps the cached names.
        r = requests.get(
            f"http://127.0.0.1:{port}/probe",
            params={"target": cluster.urls["cvm-1"]},
            headers={"X-Prometheus-Scrape-Timeout-Seconds": "5"},
            timeout=30,
        )
        assert one(r.text, "stargate_prism_up") == 1 and vm_labels(r.text)["1000"] == ("bench-01", "scsi.1")
    finally:
        proc.stop()
    log_text = proc.log_path.read_text()
    assert "vdisk names from Prism" in log_text and "with credentials" in log_text and "plain HTTP" in log_text
    assert "credentials cross the network unencrypted" in log_text
    assert PASSWORD not in log_text and USER not in log_text


def test_mapping_skips_entities_without_a_vm_and_odd_fields(cluster):
    from ioparallax.exporters.stargate.prism import mapping_from_virtual_disks

    real = cluster.prism_virtual_disks()["entities"]
    odd = [
        {**real[0], "attached_vmname": None},  # a volume group's disk
        {**real[1], "uuid": 42, "virtual_disk_id": "nonsense", "disk_address": None, "device_uuid": None},
    ]
    by_uuid, by_id = mapping_from_virtual_disks(odd)
    assert by_uuid == {} and by_id == {}
    by_uuid, by_id = mapping_from_virtual_disks(real)
    truth = expected(cluster)
    assert {k: (v.vm, v.disk, v.disk_uuid) for k, v in by_id.items()} == {k: t[1:] for k, t in truth.items()}
    assert set(by_uuid) == {t[0] for t in truth.values()}


# --- paging: Prism pages v2.0 lists; the mapping must hold every page -------------------------
@pytest.fixture
def paged_prism():
    """The Prism simulator (which pages virtual_disks by ``count``/``page`` as Prism does) with a
    synthetic cluster of 7 disks, basic auth."""
    from ioparallax.simulators.prism.server import PrismSimulator

    with PrismSimulator(vdisk_count=7, clock=lambda: FROZEN + 15, auth=(USER, PASSWORD)) as sim:
        yield sim


def test_the_mapping_pages_through_virtual_disks(paged_prism):
    """page_size 3: pages 1-3 (3, 3, 1 disks), each asked with count and page; every disk named,
    exactly as the simulator's whole list names them."""
    whole = paged_prism.model.virtual_disks(FROZEN + 15)["entities"]
    assert len(whole) == 7
    names = VDiskNames({}, PrismConfig(url=paged_prism.url, username=USER, password=PASSWORD, page_size=3))
    assert names.refresh() and names.prism_up
    assert paged_prism.requests == {"/PrismGateway/services/rest/v2.0/virtual_disks": 3}
    for e in whole:
        got = names.lookup("", e["uuid"])
        assert got == {"vm": e["attached_vmname"], "disk": e["disk_address"], "disk_uuid": e["device_uuid"].lower()}
        vdisk_id = e["virtual_disk_id"].rpartition("::")[2]
        assert names.lookup(vdisk_id, "") == got


def test_one_page_answer_is_one_request(paged_prism):
    names = VDiskNames({}, PrismConfig(url=paged_prism.url, username=USER, password=PASSWORD))
    assert names.client is not None and names.prism is not None
    assert len(virtual_disks(names.client, names.prism)) == 7
    assert sum(paged_prism.requests.values()) == 1


def test_a_page_that_fails_fails_the_refresh_and_keeps_the_mapping(paged_prism, caplog):
    """Pages that fail (HTTP 500), or the list's deadline passing between pages: the refresh
    fails with the cause, the previous mapping stays whole (never the pages read so far)."""
    names = VDiskNames({}, PrismConfig(url=paged_prism.url, username=USER, password=PASSWORD, page_size=3))
    assert names.refresh()
    first = paged_prism.model.virtual_disks(FROZEN + 15)["entities"][0]["uuid"]
    last = paged_prism.model.virtual_disks(FROZEN + 15)["entities"][-1]["uuid"]
    names.clock = lambda: time.monotonic() + 10_000  # stale
    paged_prism.set_fault("http_500", only="virtual_disks")
    with caplog.at_level(logging.WARNING, logger="ioparallax.exporters.stargate.prism"):
        assert not names.refresh()
    assert "HTTP 500" in caplog.text and PASSWORD not in caplog.text
    assert names.lookup("", first) and names.lookup("", last)
    paged_prism.set_fault("slow", delay=1.0, only="virtual_disks")
    start = time.monotonic()
    assert not names.refresh(timeout=1.5)  # 3 pages of ~1 s: the whole list's deadline ends it
    assert time.monotonic() - start < 3.0
    assert names.lookup("", last)


def test_the_stargate_simulators_prism_pages_too(cluster):
    """The Stargate simulator's Prism path pages like the Prism simulator: the mapping asked one
    disk per page names every vdisk of the scenario."""
    truth = expected(cluster)
    assert len(truth) >= 2
    names = names_for(cluster, page_size=1)
    assert names.refresh()
    for vdisk_id, (uuid, vm, disk, disk_uuid) in truth.items():
        assert names.lookup(vdisk_id, uuid) == {"vm": vm, "disk": disk, "disk_uuid": disk_uuid}
    r = requests.get(
        cluster.urls["cvm-1"] + "/PrismGateway/services/rest/v2.0/virtual_disks",
        params={"count": 1, "page": 2},
        auth=(USER, PASSWORD),
        timeout=10,
    )
    doc = r.json()
    assert len(doc["entities"]) == 1 and doc["metadata"]["grand_total_entities"] == len(truth)
    bad = requests.get(
        cluster.urls["cvm-1"] + "/PrismGateway/services/rest/v2.0/virtual_disks",
        params={"count": "x"},
        auth=(USER, PASSWORD),
        timeout=10,
    )
    assert bad.status_code == 400
