"""vCenter captures (issue 26): ``vcenter-exporter capture`` keeps the SOAP answers of one
inventory build and one probe, anonymized; ``replay`` gives the metrics the exporter made of
them; counters vCenter offers and the exporter does not map are counted. Against the scenario
vCenter simulator (govmomi) on loopback."""

from __future__ import annotations

import copy
import logging
import os
import re
import tarfile

import pytest
import requests

from ioparallax.exporters.common.capture import CaptureError
from ioparallax.exporters.common.web.server import ExporterServer
from ioparallax.exporters.vcenter.capture import (
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
from ioparallax.exporters.vcenter.cli import main as vcenter_main, make_app
from ioparallax.exporters.vcenter.config import TargetConfig
from ioparallax.exporters.vcenter.parse import inventory_from_pages, parse_page
from tests.exporters.vcenter.conftest import PASSWORD, USER, compiled_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return compiled_trace("zero-heavy", tmp_path_factory)


CFG = TargetConfig(username=USER, password=PASSWORD, insecure_skip_verify=True)


def identities(cap) -> set[str]:
    """Names, UUIDs and files of the inventory the capture's answers hold (read by the
    exporter's own inventory parse), and the vCenter's address."""
    pages = [parse_page(ex.answer, ex.status)[0] for ex in cap.exchanges if "Retrieve" in ex.method]
    out = {cap.target.rsplit(":", 1)[0]}
    for vm in inventory_from_pages(iter(pages)):
        out |= {vm.name, vm.host, vm.uuid, vm.instance_uuid}
        for d in vm.disks:
            out |= {d.disk_uuid, d.backing_file, d.datastore}
    return {s for s in out if s}


def test_replayed_capture_gives_the_probes_metrics_and_hides_every_identity(scenario_sim, trace, tmp_path):
    address, _ = scenario_sim(trace[0])
    raw, live = capture(address, CFG)
    assert raw.manifest["up"] and raw.manifest["vms"] == 2 + 3  # bench-01, bench-02 and the 3 CVMs
    methods = [ex.method for ex in raw.exchanges]
    assert methods[0] == "RetrievePropertiesEx" and "QueryPerf" in methods
    secrets = identities(raw)
    assert "bench-01" in secrets and "127.0.0.1" in secrets and any(s.startswith("[") for s in secrets)
    # Unanonymized, the replay is the probe, line for line (all but durations and ages).
    assert comparable(replay(copy.deepcopy(raw)).decode()) == comparable(live.decode())
    # Anonymized: the probe's lines with the same replacements, values unchanged.
    anon_cap = copy.deepcopy(raw)
    anon = anonymize(anon_cap)
    metrics = replay(anon_cap)
    # (sorted: the exposition orders VMs by name, and the placeholders sort otherwise)
    assert sorted(comparable(metrics.decode())) == sorted(comparable(anon.text(live.decode())))
    path = tmp_path / "c.tar.gz"
    write(anon_cap, str(path), metrics)
    with tarfile.open(path) as tar:
        files = {m.name: tar.extractfile(m).read().decode("utf-8", "replace") for m in tar if m.isfile()}
    for name, text in files.items():
        for s in secrets:
            assert s.lower() not in text.lower(), (name, s)
    assert 'vm="bench-01"' in live.decode() and re.search(r'vm="name-\d+"', files["metrics.prom"])
    assert comparable(read(str(path)).metrics) == comparable(metrics.decode())


def test_capture_and_replay_commands(scenario_sim, trace, tmp_path, capsys):
    address, _ = scenario_sim(trace[0])
    os.environ["IOPARALLAX_TEST_VC_PASSWORD"] = PASSWORD
    conf = tmp_path / "vc.yml"
    conf.write_text(
        f"defaults:\n  username: {USER}\n  password_env: IOPARALLAX_TEST_VC_PASSWORD\n  insecure_skip_verify: true\n"
    )
    out = tmp_path / "c.tar.gz"
    assert capture_main(["--target", address, "--config.file", str(conf), "-o", str(out)]) == 0
    assert "anonymized:" in capsys.readouterr().out
    cap = read(str(out))
    m = cap.manifest
    assert m["exporter"] == "vcenter-exporter" and m["version"] and m["anonymized"] is True
    assert m["target"].startswith("198.18.0.1:")
    assert all(e["status"] == 200 and e["bytes"] > 0 and e["seconds"] >= 0 for e in m["exchanges"])
    assert "virtualDisk.read.average" in m["counters"].values()
    assert replay_main([str(out), "--check"]) == 0
    # The counters this vCenter offers and the exporter does not read are counted.
    unmapped = [line for line in cap.metrics.splitlines() if line.startswith("vcenter_unmapped_counters ")]
    assert unmapped and int(float(unmapped[0].split()[1])) > 0
    # A wrong expectation is a failed check that names the lines.
    wrong = tmp_path / "wrong.prom"
    wrong.write_text(cap.metrics.replace("vcenter_up 1", "vcenter_up 0"))
    capsys.readouterr()
    assert replay_main([str(out), "--check", str(wrong)]) == 1
    assert "- vcenter_up 0" in capsys.readouterr().out


def test_an_unlisted_or_bad_target_is_refused_before_any_connection(tmp_path, capsys):
    conf = tmp_path / "vc.yml"
    conf.write_text("targets:\n  vc1.example.com: {}\n")
    assert capture_main(["--target", "bad target!", "--config.file", str(conf)]) == 2
    assert "error:" in capsys.readouterr().err


def test_a_file_that_is_not_a_capture_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"nope")
    with pytest.raises(CaptureError, match="not a capture"):
        read(str(bad))
    assert replay_main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err
    assert vcenter_main(["--replay", str(bad)]) == 2


def test_exporter_serves_a_capture_with_replay(scenario_sim, trace, tmp_path):
    address, _ = scenario_sim(trace[0])
    cap, _ = capture(address, CFG)
    anonymize(cap)
    path = tmp_path / "c.tar.gz"
    write(cap, str(path), replay(copy.deepcopy(cap)))
    config, factory = replay_setup(str(path))
    app, targets = make_app(config, 10.0, factory)
    srv = ExporterServer(app, "127.0.0.1", 0).start()
    try:
        target = read(str(path)).target
        first = requests.get(srv.url + "/probe", params={"target": target}, timeout=30)
        assert first.status_code == 200
        assert comparable(first.text) == comparable(read(str(path)).metrics)
        # Later probes ask for samples since the last one: the same batches' answers, nothing new.
        again = requests.get(srv.url + "/probe", params={"target": target}, timeout=30)
        assert "vcenter_up 1" in again.text
        counters = [ln for ln in comparable(first.text) if ln.startswith("vcenter_virtual_disk_read_ops_total")]
        assert counters and all(ln in comparable(again.text) for ln in counters)
        # Only the capture's target may be probed.
        assert requests.get(srv.url + "/probe", params={"target": "vc9.example.com"}, timeout=30).status_code == 400
    finally:
        srv.stop()
        targets.close()


def test_answer_series_the_exporter_does_not_read_are_counted_and_logged(scenario_sim, trace, caplog):
    address, _ = scenario_sim(trace[0])
    cap, live = capture(address, CFG)
    assert "vcenter_perf_unread_series 0" in live.decode()
    perf = next(ex for ex in cap.exchanges if ex.method == "QueryPerf")
    # A counter nobody asked for, and a disk instance the inventory does not list.
    first_counter = re.search(rb"<counterId>(\d+)</counterId>", perf.answer).group(1)
    perf.answer = perf.answer.replace(
        b"<counterId>" + first_counter + b"</counterId>", b"<counterId>999999</counterId>", 1
    )
    perf.answer = perf.answer.replace(b"<instance>scsi0:1</instance>", b"<instance>nvme3:7</instance>")
    caplog.set_level(logging.INFO)
    text = replay(cap).decode()
    unread = int(float(next(ln for ln in text.splitlines() if ln.startswith("vcenter_perf_unread_series ")).split()[1]))
    assert unread == 1 + 2  # one series of an unknown counter; both VMs' answers for an unknown instance
    assert any("'nvme3:7'" in r.getMessage() and "no disk of its inventory" in r.getMessage() for r in caplog.records)


def test_inventory_disks_without_a_controller_address_are_counted_and_logged(scenario_sim, trace, caplog):
    address, _ = scenario_sim(trace[0])
    cap, live = capture(address, CFG)
    assert "vcenter_inventory_unread_disks 0" in live.decode()
    inv = next(ex for ex in cap.exchanges if ex.method == "RetrievePropertiesEx")
    # One VM's disk points at a controller the VM does not have.
    m = re.search(rb'type="VirtualDisk".*?<controllerKey>(\d+)</controllerKey>', inv.answer, re.S)
    assert m
    inv.answer = inv.answer[: m.start(1)] + b"987654" + inv.answer[m.end(1) :]
    caplog.set_level(logging.INFO)
    text = replay(cap).decode()
    assert "vcenter_inventory_unread_disks 1" in text
    assert text.count("vcenter_virtual_disk_info{") == live.decode().count("vcenter_virtual_disk_info{") - 1
    assert any("have no controller address" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- issue 33: planted spellings
#: Rewrites of the simulator's SOAP answers (bytes), as a vCenter may spell them: names as
#: character references (hex and decimal), a URL as a guest's host name.
PLANTED_SOAP = [
    (b"ACMEHEX", b"&#x41;CMEHEX"),
    ("Zürich".encode(), b"Z&#252;rich"),
    (b">urlhost<", b">http://esx-secret.corp.example/vm<"),
]


def planted_trace(tmp_path):
    """zero-heavy with names that hold what a capture must not keep: addresses and UUIDs
    inside names, an IPv4-mapped address as a host, a non-ASCII letter."""
    import yaml

    from ioparallax.simulators.scenario import compile_scenario
    from ioparallax.simulators.scenario.model import parse_scenario, scenario_path

    data = yaml.safe_load(scenario_path("zero-heavy").read_text())
    vm0, vm1 = data["vms"]
    vm0.update(name="ACMEHEX-db", host="nfs-10.55.66.77")
    vm0["disks"][0]["backing_file"] = (
        "[backup_10.66.77.88] ACMEHEX-db/vma4cd5576-8fd3-48e6-93c4-9f72698125b5_vm_a1b2c3d4_1111_4222_8333_444455556666.vmdk"
    )
    vm1.update(name="Zürich-store", host="::ffff:10.77.88.99", hostname="urlhost")
    trace = compile_scenario(parse_scenario(data))
    path = tmp_path / "planted.json"
    path.write_text(trace.to_json())
    return path


def test_every_planted_spelling_is_anonymized_and_the_values_kept(scenario_sim, tmp_path, monkeypatch):
    """SOAP answers naming VMs as character references (``&#x41;CMEHEX-db``, ``Z&#252;rich``),
    addresses and UUIDs inside names, an IPv4-mapped host, a URL to another host: none is in any
    member of the archive (as written or decoded), and the replay gives the live probe's values."""
    import http.client

    from tests.captures.planted import CORES, survivors, values_by_name as values

    address, _ = scenario_sim(planted_trace(tmp_path))
    real_read = http.client.HTTPResponse.read

    def planted_read(self, amt=None):
        data = real_read(self, amt)
        if amt is None and b"RetrievePropertiesExResponse" in data:
            for old, new in PLANTED_SOAP:
                data = data.replace(old, new)
        return data

    monkeypatch.setattr(http.client.HTTPResponse, "read", planted_read)
    raw, live = capture(address, CFG)
    monkeypatch.undo()
    assert raw.manifest["up"], raw.manifest["error"]
    answers = b"".join(ex.answer for ex in raw.exchanges)
    assert b"&#x41;CMEHEX-db" in answers and b"Z&#252;rich" in answers and b"esx-secret" in answers  # planted
    assert 'vm="ACMEHEX-db"' in live.decode() and 'vm="Zürich-store"' in live.decode()  # and read, decoded
    anonymize(raw)
    metrics = replay(raw)
    path = tmp_path / "c.tar.gz"
    write(raw, str(path), metrics)
    cores = {
        k: v
        for k, v in CORES.items()
        if v
        in {
            "cmehex",
            "rich-store",
            "10.55.66.77",
            "10.66.77.88",
            "10.77.88.99",
            "9f72698125b5",
            "444455556666",
            "esx-secret",
        }
    }
    assert survivors(str(path), cores) == []
    assert values(comparable(metrics.decode())) == values(comparable(live.decode()))
    # Every VM name anonymized: the scenario's two VMs and its three CVMs (NTNX-...-CVM).
    assert len(re.findall(r'^vcenter_vm_info\{vm="name-\d+"', metrics.decode(), re.M)) == 2 + 3
