"""Prism captures (issue 26): ``prism-exporter capture`` keeps the JSON answers of one probe
(every virtual_disks page, the VM list and hosts, the v4 series), anonymized; ``replay`` and
``--replay`` give the metrics the exporter made of them; stats keys the exporter does not know
are counted and named. Against the Prism simulator on loopback (clock frozen)."""

from __future__ import annotations

import copy
import json
import logging
import re
import tarfile

import pytest
import requests

from ioparallax.exporters.common.web.server import ExporterServer
from ioparallax.exporters.prism import parse
from ioparallax.exporters.prism.capture import (
    CaptureError,
    ReplayClient,
    _settings,
    anonymize,
    capture,
    capture_main,
    comparable,
    read,
    replay,
    replay_main,
    replay_setup,
    write,
)
from ioparallax.exporters.prism.cli import main as prism_main, make_app
from ioparallax.exporters.prism.config import Collectors, TargetConfig
from ioparallax.exporters.prism.target import Target
from tests.exporters.prism.conftest import FROZEN, PASSWORD, USER
from tests.support import metric_value as value, parse_metrics

CFG = TargetConfig(username=USER, password=PASSWORD, scheme="http", page_size=1)


@pytest.fixture
def sim(prism_sim):
    return prism_sim("noisy-neighbour", clock=lambda: FROZEN)


def identities(cap) -> set[str]:
    """Names, UUIDs, paths of the answers (read by the exporter's own parse) and the address."""
    out = {cap.target.rsplit(":", 1)[0]}
    for ex in cap.exchanges:
        doc = json.loads(ex.answer)
        ents, _ = parse.entities(doc, ex.path)
        if "virtual_disks" in ex.path:
            for e in ents:
                r = parse.virtual_disk(e)
                assert r is not None
                out |= {r.vm, r.vm_id, r.uuid, r.container, r.nfs_path, e["device_uuid"], e["storage_container_uuid"]}
                out |= {e["cluster_uuid"], r.nfs_path.rsplit("/", 1)[1]}
        else:
            for e in ents:
                out |= {e["uuid"], e["name"]} | ({e["host_uuid"]} if e.get("host_uuid") else set())
    return {x for x in out if x}


def values_by_name(text: str) -> dict[str, list[float]]:
    """Each metric's values, sorted, without labels: what anonymization must not change."""
    out: dict[str, list[float]] = {}
    for line in comparable(text):
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        out.setdefault(name, []).append(float(line.rsplit(" ", 1)[1]))
    return {k: sorted(v) for k, v in out.items()}


def test_replay_gives_the_live_probe_metrics(sim):
    cap, live = capture(sim.address, CFG)
    assert cap.manifest["up"], cap.manifest["error"]
    paths = [(ex.path.rsplit("/", 2)[-2], ex.params.get("page")) for ex in cap.exchanges]
    # page_size 1: both disks' pages, the pages of both VMs and of the 3 CVMs, the hosts.
    assert sorted(paths) == [("hosts", "1"), ("virtual_disks", "1"), ("virtual_disks", "2")] + [
        ("vms", str(p)) for p in range(1, 6)
    ]
    got = replay(cap).decode()
    assert comparable(got) == comparable(live.decode())
    m = parse_metrics(got)
    assert value(m, "prism_virtual_disk_read_ops_total", vm="oltp-01") == 120000.0
    assert value(m, "prism_parse_unknown_fields") == 0


def test_anonymized_capture_holds_no_identity_and_the_same_values(sim, tmp_path):
    cap, live = capture(sim.address, CFG)
    secrets = identities(cap)
    assert {"oltp-01", "ctr01", "127.0.0.1"} <= secrets
    anonymize(cap)
    metrics = replay(cap)
    out = tmp_path / "c.tar.gz"
    write(cap, str(out), metrics)
    with tarfile.open(out) as tar:
        blob = b"\n".join(tar.extractfile(m).read() for m in tar if m.isfile()).decode().lower()  # type: ignore[union-attr]
    leaked = sorted(s for s in secrets if s.lower() in blob)
    assert leaked == []
    # Labels change, values do not; the container still groups both disks.
    assert values_by_name(metrics.decode()) == values_by_name(live.decode())
    m = parse_metrics(metrics.decode())
    containers = {dict(k)["container"] for k in m["prism_virtual_disk_info"]}
    assert containers == {"container-1"}
    assert value(m, "prism_virtual_disk_read_ops_total", vm="vm-1") == 120000.0
    # The archive replays to its own metrics.prom.
    back = read(str(out))
    assert back.manifest["anonymized"] is True
    assert comparable(replay(back).decode()) == comparable(back.metrics)


def test_v4_series_are_captured_and_replayed(sim):
    cfg = TargetConfig(username=USER, password=PASSWORD, scheme="http", controller_api="v4")
    cap, live = capture(sim.address, cfg, Collectors(vm_info=False))
    v4 = [ex for ex in cap.exchanges if "/stats/" in ex.path]
    assert len(v4) == 2 and all("$startTime" in ex.params for ex in v4)
    anonymize(cap)
    assert values_by_name(replay(cap).decode()) == values_by_name(live.decode())
    assert not any("/v2.0/vms/" in ex.path for ex in cap.exchanges)  # vm_info off: no VM list


def test_capture_command_replay_check_and_replay_server(sim, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PRISM_USERNAME", USER)
    monkeypatch.setenv("PRISM_PASSWORD", PASSWORD)
    cfg = tmp_path / "prism.yml"
    cfg.write_text("defaults:\n  scheme: http\n  page_size: 1\n")
    out = tmp_path / "cap.tar.gz"
    assert capture_main(["--target", sim.address, "--config.file", str(cfg), "-o", str(out)]) == 0
    assert "anonymized:" in capsys.readouterr().out
    assert replay_main([str(out), "--check"]) == 0
    assert "as expected" in capsys.readouterr().out
    # --check against another exposition fails and names the difference.
    other = tmp_path / "other.prom"
    other.write_text(read(str(out)).metrics.replace("120000.0", "1.0"))
    assert replay_main([str(out), "--check", str(other)]) == 1
    assert "- prism_virtual_disk_read_ops_total" in capsys.readouterr().out
    # --replay: /probe answers from the capture, and a second probe counts nothing twice.
    config, factory = replay_setup(str(out))
    app, targets = make_app(config, client_factory=factory)
    server = ExporterServer(app, "127.0.0.1", 0).start()
    try:
        target = next(iter(config.targets))
        texts = [requests.get(f"{server.url}/probe", params={"target": target}, timeout=30).text for _ in range(2)]
        assert comparable(texts[0]) == comparable(read(str(out)).metrics)
        second = parse_metrics(texts[1])
        assert value(second, "prism_virtual_disk_read_ops_total", vm="vm-1") == 120000.0
        assert value(second, "prism_v2_new_samples") == 0
        r = requests.get(f"{server.url}/probe", params={"target": "prism.example.com"}, timeout=30)
        assert r.status_code == 400  # only the capture's target
    finally:
        server.stop()
        targets.close()


def test_not_a_capture_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tarball")
    with pytest.raises(CaptureError, match="bad.tar.gz: not a capture"):
        read(str(bad))
    assert replay_main([str(bad)]) == 2
    assert prism_main(["--replay", str(bad)]) == 2
    assert "Traceback" not in capsys.readouterr().err


# ------------------------------------------------------------------------ parse coverage
EXTRA_KEYS = {"controller.wss_120s_read_MB": "12", "hypervisor_num_unmap_io": "7"}


def with_extra_keys(cap, keys: dict[str, str], only_first: bool = False):
    """The capture with ``keys`` added to the stats of its virtual disks (of the first only)."""
    cap = copy.deepcopy(cap)
    done = False
    for ex in cap.exchanges:
        if "virtual_disks" in ex.path:
            doc = json.loads(ex.answer)
            for e in doc["entities"]:
                if not (only_first and done):
                    e["stats"].update(keys)
                    done = True
            ex.answer = json.dumps(doc).encode()
    return cap


def test_unknown_stats_keys_are_counted_named_and_logged_once(sim, caplog):
    cap, _ = capture(sim.address, CFG)
    base = parse_metrics(replay(cap).decode())
    mutated = with_extra_keys(cap, EXTRA_KEYS)
    caplog.set_level(logging.INFO, logger="ioparallax.exporters.prism")
    m = parse_metrics(replay(mutated).decode())
    assert value(m, "prism_parse_unknown_fields") == 2
    for key in EXTRA_KEYS:
        assert value(m, "prism_parse_unknown_field_entities", answer="virtual_disks", kind="stats_key", item=key) == 2
    lines = [r.getMessage() for r in caplog.records if "is not read by ioparallax" in r.getMessage()]
    assert len(lines) == 2 and all("capture the answer" in x for x in lines)
    assert any("'controller.wss_120s_read_MB'" in x and "(2 disks hold it)" in x for x in lines)
    # Known values unchanged by the extra keys.
    for name in ("prism_virtual_disk_read_ops_total", "prism_virtual_disk_controller_write_bytes_total"):
        assert m[name] == base[name]


def test_unknown_keys_are_logged_once_per_target(sim, caplog):
    cap, _ = capture(sim.address, CFG)
    config, _ = _settings(cap)
    mutated = with_extra_keys(cap, {"hypervisor_num_unmap_io": "7"}, only_first=True)
    caplog.set_level(logging.INFO, logger="ioparallax.exporters.prism")
    t = Target(cap.target, config, client_factory=lambda n, c: ReplayClient(mutated))
    try:
        for _ in range(3):
            snap = t.probe(30)
            assert snap.unknown_keys == {"hypervisor_num_unmap_io": 1} and snap.unknown_count == 1
    finally:
        t.close()
    assert sum("is not read by ioparallax" in r.getMessage() for r in caplog.records) == 1


def test_unknown_keys_are_bounded(sim):
    cap, _ = capture(sim.address, CFG)
    many = {f"controller.read_size_histogram_{2**i}kB": "1" for i in range(60)}
    m = parse_metrics(replay(with_extra_keys(cap, many)).decode())
    assert value(m, "prism_parse_unknown_fields") == 60
    assert len(m["prism_parse_unknown_field_entities"]) == 50


def test_every_key_of_the_simulator_and_public_shape_is_known():
    for name in ("virtual_disks-noisy-neighbour.json", "virtual_disks-public-shape.json"):
        with open(f"tests/exporters/prism/data/{name}") as f:
            ents, _ = parse.entities(json.load(f), name)
        assert parse.unknown_stats_keys(ents) == {}, name


def test_a_refused_login_is_captured_and_replays_as_prism_up_0(sim, tmp_path, monkeypatch, capsys):
    """A user whose exporter shows prism_up 0 sends a capture of that: the 401 is kept and its
    replay fails the same way (kind login), with no password anywhere in the archive."""
    monkeypatch.setenv("PRISM_USERNAME", USER)
    monkeypatch.setenv("PRISM_PASSWORD", "wrong-Secret-42")
    cfg = tmp_path / "prism.yml"
    cfg.write_text("defaults:\n  scheme: http\n")
    out = tmp_path / "cap.tar.gz"
    assert capture_main(["--target", sim.address, "--config.file", str(cfg), "-o", str(out)]) == 1
    assert "probe DOWN: HTTP 401" in capsys.readouterr().out
    cap = read(str(out))
    assert [ex.status for ex in cap.exchanges] and {ex.status for ex in cap.exchanges} == {401}
    m = parse_metrics(replay(cap).decode())
    assert value(m, "prism_up") == 0
    assert value(m, "prism_probe_errors_total", kind="login") == 1
    with tarfile.open(out) as tar:
        blob = b"".join(tar.extractfile(x).read() for x in tar if x.isfile())  # type: ignore[union-attr]
    assert b"wrong-Secret-42" not in blob and PASSWORD.encode() not in blob


def test_a_real_shaped_hosts_answer_loses_its_names_serials_and_addresses():
    """What a real Prism's hosts answer holds beside uuid and name (written by hand in the shape
    of public v2.0 answers, not copied): serials of the block, node and disks, the management
    server (vCenter) name, CVM/hypervisor/IPMI addresses; all replaced, the JSON still parses to
    the same host map under the placeholders."""
    from ioparallax.exporters.prism.capture import Capture, Exchange

    host_uuid = "5d2a0b8e-7c1f-4e3a-9b6d-0123456789ab"
    secrets = {
        "NTNX-18SM3E420118-A": "name",
        "18SM3E420118": "block_serial",
        "ZM17BS012345": "serial",
        "S3F3NX0K123456": "serial_number",
        "vc1.corp.example": "management_server_name",
        "10.1.2.3": "hypervisor_address",
        "10.1.2.4": "service_vmexternal_ip",
        "10.1.3.3": "ipmi_address",
    }
    entity = {
        "uuid": host_uuid,
        "name": "NTNX-18SM3E420118-A",
        "serial": "ZM17BS012345",
        "block_serial": "18SM3E420118",
        "block_model_name": "NX-3060-G5",
        "management_server_name": "vc1.corp.example",
        "hypervisor_address": "10.1.2.3",
        "service_vmexternal_ip": "10.1.2.4",
        "ipmi_address": "10.1.3.3",
        "num_cpu_cores": 24,
        "disk_hardware_configs": {"1": {"serial_number": "S3F3NX0K123456", "mount_path": "/home/nutanix/data"}},
    }
    doc = {"metadata": {"grand_total_entities": 1, "count": 1}, "entities": [entity]}
    ex = Exchange(
        path="/PrismGateway/services/rest/v2.0/hosts/",
        params={},
        content_type="application/json",
        date="",
        status=200,
        answer=json.dumps(doc).encode(),
        seconds=0,
        offset=0,
    )
    cap = Capture({"target": "prism1.corp.example:9440"}, [ex])
    anonymize(cap)
    text = cap.exchanges[0].answer.decode()
    assert [s for s in secrets if s.lower() in text.lower()] == []
    assert "prism1.corp.example" not in json.dumps(cap.manifest)
    out = json.loads(text)
    hosts = parse.hosts(out["entities"])
    assert list(hosts.values()) == ["host-2"]  # host-1 is the Prism's own name
    assert out["entities"][0]["num_cpu_cores"] == 24 and out["entities"][0]["block_model_name"] == "NX-3060-G5"


# ---------------------------------------------------------------- issue 33: planted spellings
#: (what the simulator writes, what it is made to write instead), in the JSON text of every
#: answer: names in JSON escapes, addresses and UUIDs inside names, a URL to another host and a
#: percent-encoded name in free text.
PLANTED_JSON = [
    ('"oltp-01"', r'"\u0041CMEJSON-vm"'),
    ("/oltp-01/oltp-01-flat", r"/\u0041CMEJSON-vm/\u0041CMEJSON-vm-flat"),
    ('"dss-01"', r'"grp\/SLASHVM"'),
    ("/dss-01/dss-01-flat", r"/grp\/SLASHVM/grp\/SLASHVM-flat"),
    ("ctr01", r"Z\u00fcrich-store"),
    ('"esx-01"', '"nfs-10.55.66.77"'),
    ('"esx-02"', '"PCTNAME-host"'),
    ('"description":"linux"', '"description":"backup_10.66.77.88 on ::ffff:10.77.88.99"'),
]
PLANTED_URL = (
    r'"description":"https:\/\/esx-secret.corp.example\/ui\/#\/hosts?name=%50CTNAME-host'
    r'&vm=vma4cd5576-8fd3-48e6-93c4-9f72698125b5&g=vm_a1b2c3d4_1111_4222_8333_444455556666"'
)


def test_every_planted_spelling_is_anonymized_and_the_values_kept(prism_sim, tmp_path, monkeypatch):
    """The simulator's JSON answers with names in JSON escapes (``\\u0041CMEJSON-vm``,
    ``grp\\/SLASHVM``, ``Z\\u00fcrich-store``), addresses and UUIDs inside names, an IPv4-mapped
    address, a URL to another host and a percent-encoded host name: none is in any member of the
    archive (as written or decoded), and the replay gives the live probe's values."""
    from ioparallax.simulators.prism import server
    from tests.captures.planted import CORES, survivors, values_by_name as values

    real_json = server._json

    def planted(doc):
        text = real_json(doc).decode()
        if '"dss-01"' in text:  # the second VM's page (page_size 1): the URL in its description
            text = text.replace('"description":"linux"', PLANTED_URL)
        for old, new in PLANTED_JSON:
            text = text.replace(old, new)
        return text.encode()

    monkeypatch.setattr(server, "_json", planted)
    sim = prism_sim("noisy-neighbour", clock=lambda: FROZEN)
    cap, live = capture(sim.address, CFG)
    assert cap.manifest["up"], cap.manifest["error"]
    raw = b"".join(ex.answer for ex in cap.exchanges)
    assert rb"\u0041CMEJSON-vm" in raw and b"esx-secret" in raw and b"%50CTNAME" in raw  # planted
    m = parse_metrics(live.decode())
    assert value(m, "prism_virtual_disk_read_ops_total", vm="ACMEJSON-vm") == 120000.0  # and read, decoded
    anonymize(cap)
    metrics = replay(cap)
    out = tmp_path / "c.tar.gz"
    write(cap, str(out), metrics)
    planted_cores = {k: v for k, v in CORES.items() if "tag" not in k and "reference" not in k}
    assert survivors(str(out), planted_cores) == []
    assert values(comparable(metrics.decode())) == values(comparable(live.decode()))
    m = parse_metrics(metrics.decode())
    assert value(m, "prism_virtual_disk_read_ops_total", vm="vm-1") == 120000.0
    assert {dict(k)["container"] for k in m["prism_virtual_disk_info"]} == {"container-1"}
