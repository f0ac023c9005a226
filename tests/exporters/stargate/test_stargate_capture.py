"""Captures (issue 26): ``stargate-exporter capture`` fetches what a probe fetches, anonymizes it
consistently, and a replay of the capture gives the live probe's metrics (modulo the anonymized
label values). Against the Stargate simulator and a fake Stargate on loopback.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import time

import pytest
import requests
import yaml

from ioparallax.exporters.common.anonymize import Anonymizer
from ioparallax.exporters.common.web.server import ExporterServer
from ioparallax.exporters.stargate.address import TargetPolicy
from ioparallax.exporters.stargate.capture import (
    CaptureError,
    ReplayClient,
    anonymize,
    capture,
    capture_main,
    comparable,
    read,
    replay,
    replay_main,
    write,
)
from ioparallax.exporters.stargate.cli import main as cli_main, make_app
from ioparallax.exporters.stargate.client import HttpClient
from ioparallax.exporters.stargate.collector import StargateCollector
from ioparallax.exporters.stargate.target import probe
from ioparallax.simulators.scenario.model import parse_scenario, scenario_path
from ioparallax.simulators.stargate.server import StargateCluster
from tests.exporters.stargate.hostile import FROZEN, Canary, HostileStargate, real_pages, response, set_links
from tests.exporters.stargate.test_stargate_faults import site


def identifying_scenario():
    """zero-heavy with vdisk names that carry the VM, container and cluster names (NFS paths),
    as a real cluster's may."""
    data = yaml.safe_load(scenario_path("zero-heavy").read_text())
    data["cluster"]["name"] = "acme-prod-cluster"
    for vm in data["vms"]:
        for i, disk in enumerate(vm["disks"]):
            disk["vdisk_name"] = f"NFS:/acme-ctr/{vm['name']}/{vm['name']}_{i}-flat.vmdk"
    return parse_scenario(data)


def ports(sim) -> tuple[int, ...]:
    return tuple(int(u.rsplit(":", 1)[1]) for u in sim.urls.values())


def live(sim, target: str, discover: bool) -> str:
    result = probe(
        HttpClient(),
        target,
        time.monotonic() + 10,
        discover=discover,
        policy=TargetPolicy(["127.0.0.1", "localhost"]),
        discovery_ports=ports(sim),
    )
    assert result.up
    return StargateCollector(result).render().decode()


def captured(sim, target: str, discover: bool, tmp_path, anon: bool = True):
    cap, result = capture(
        target,
        discover=discover,
        policy=TargetPolicy(["127.0.0.1", "localhost"]),
        discovery_ports=ports(sim),
    )
    assert result.up
    anonymizer = anonymize(cap) if anon else None
    _, metrics = replay(cap)
    path = str(tmp_path / "capture.tar.gz")
    write(cap, path, metrics)
    return path, anonymizer


@pytest.fixture(scope="module")
def sim():
    with StargateCluster(identifying_scenario(), clock=lambda: FROZEN) as cluster:
        yield cluster


@pytest.mark.parametrize("discover", [False, True])
def test_replayed_capture_gives_the_live_metrics_modulo_anonymized_labels(sim, tmp_path, discover):
    target = sim.urls["cvm-1"].split("://")[1]
    path, anon = captured(sim, target, discover, tmp_path)
    before = live(sim, target, discover)
    back = read(path)
    _, metrics = replay(back)
    got = comparable(metrics.decode())
    # The live exposition with its names, addresses and UUIDs replaced as the capture's were:
    # every value and every other label the same, line for line.
    assert got == comparable(anon.text(before))
    assert got == comparable(back.metrics), "the capture's own metrics.prom is its replay"
    assert got != comparable(before), "labels were anonymized"
    # Every vdisk of the scenario, with its values.
    vdisks = {m.group(1) for m in re.finditer(r'stargate_vdisk_info\{vdisk_id="(\d+)"', metrics.decode())}
    hosted = {str(d.vdisk_id) for d in sim.scenario.disks if discover or d.cvm == "cvm-1"}
    assert vdisks == hosted
    assert 'stargate_vdisk_read_ops_per_second{vdisk_id="1000"} 9000.0' in got


def test_capture_without_anonymization_replays_to_the_same_lines(sim, tmp_path):
    target = sim.urls["cvm-2"].split("://")[1]
    path, _ = captured(sim, target, True, tmp_path, anon=False)
    back = read(path)
    assert back.manifest["anonymized"] is False
    _, metrics = replay(back)
    assert comparable(metrics.decode()) == comparable(live(sim, target, True))


def input_identifiers(scenario) -> set[str]:
    """Every name, address and UUID of the simulator's scenario that a page could show."""
    out = {scenario.cluster.name, "127.0.0.1", "localhost"}
    out |= set(scenario.cluster.cvms)
    for d in scenario.disks:
        out |= {d.vm, d.vdisk_name, d.vdisk_uuid, d.uuid, d.backing_file}
        out |= {part for part in re.split(r"[/\[\] ]+", d.vdisk_name.split(":", 1)[1]) if part}
        out |= {part for part in re.split(r"[/\[\] ]+", d.backing_file) if len(part) > 3}
    return {s for s in out if s}


def archive_text(path: str) -> dict[str, str]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read().decode("utf-8", "replace") for m in tar if m.isfile()}


def leaks(files: dict[str, str], secrets: set[str]) -> list[tuple[str, str]]:
    found = []
    for name, text in files.items():
        low = text.lower()
        for s in secrets:
            if len(s) >= 5 and s.lower() in low:
                found.append((name, s))
            elif len(s) < 5 and re.search(rf"(?<![a-z0-9]){re.escape(s.lower())}(?![a-z0-9])", low):
                found.append((name, s))
    return found


def test_no_name_address_or_uuid_of_the_input_is_in_the_capture(tmp_path):
    """Through the real command, against the simulator listening on a host *name* (localhost):
    nothing of the scenario's identity is in any file of the capture, while the values are."""
    scenario = identifying_scenario()
    with StargateCluster(scenario, host="localhost", clock=lambda: FROZEN) as sim:
        target = sim.urls["cvm-1"].split("://")[1]
        assert target.startswith("localhost:")
        cfg = tmp_path / "stargate.yml"
        cfg.write_text(yaml.safe_dump({"targets": ["localhost"], "discovery_ports": list(ports(sim))}))
        out = tmp_path / "c.tar.gz"
        assert capture_main(["--target", target, "--discover", "--config.file", str(cfg), "-o", str(out)]) == 0
        before = live(sim, target, True)
    files = archive_text(str(out))
    secrets = input_identifiers(scenario)
    assert "acme-prod-cluster" in secrets and "bench-01" in secrets and "localhost" in secrets
    # The input did hold them (the test would prove nothing otherwise) ...
    assert "bench-01" in before and "localhost" in before
    # ... and no file of the capture does.
    assert leaks(files, secrets) == []
    # Placeholders keep the forms the parser and the replay need.
    manifest = json.loads(files["manifest.json"])
    assert re.fullmatch(r"host-1\.invalid:\d+", manifest["target"])
    assert re.search(r"<td>vdisk-\d \(00000000-0000-4000-8000-00000000000\d\)</td>", files["pages/00000-main.html"])
    # The build string is kept as it is.
    assert manifest["pages"][0]["build"] == "el7.3-release-euphrates-5.0.2-stable-5d92a1c6b8e4"
    # The values are the live probe's.
    values = [line for line in comparable(files["metrics.prom"]) if line.startswith("stargate_vdisk_read")]
    assert values and all(line.split(" ")[-1] in before for line in values)
    anon_lines = sorted(
        line.rsplit(" ", 1)[1] for line in comparable(files["metrics.prom"]) if not line.startswith("#")
    )
    live_lines = sorted(line.rsplit(" ", 1)[1] for line in comparable(before) if not line.startswith("#"))
    assert anon_lines == live_lines


def test_names_in_tables_the_parser_does_not_know_are_anonymized(tmp_path):
    """A page with a table we never saw, naming VMs, datastores and hosts: its naming columns are
    anonymized too (and it is counted as unknown)."""
    main, details = real_pages(2)
    extra = (
        '<table width="100%" bgcolor="#d8d8d8"><tr><td><font>VM&nbsp;Disks</font></td></tr></table>\n'
        "<table><tr><th>VM Name</th><th>Datastore</th><th>Host</th><th>Size (GB)</th></tr>"
        "<tr><td>sql-prod-07</td><td>[gold-ds] sql-prod-07/sql-prod-07.vmdk</td><td>esx-12.corp.example.com</td>"
        "<td>500</td></tr></table>\n"
    )
    main = main.replace("</body>", extra + "</body>")
    with HostileStargate(site(main, details)) as fake:
        cap, result = capture(fake.target, policy=TargetPolicy(["127.0.0.1"]))
    assert result.unknown == {("main", "vm_disks", "table", "vm disks"): 1}
    anonymize(cap)
    page = cap.pages[0].body.decode()
    for secret in ("sql-prod-07", "gold-ds", "esx-12", "corp.example.com", "127.0.0.1"):
        assert secret not in page, secret
    assert "<td>500</td>" in page and "VM Name" in page and "Datastore" in page


def test_manifest_records_each_fetch_and_failed_pages_replay_as_failed(tmp_path):
    main, details = real_pages(3)
    failing = {"/vdisk_stats": lambda p: response(b"oops", "500 Internal Server Error") if "1001" in p else None}

    def answer(path):
        if "1001" in path:
            return failing["/vdisk_stats"](path)
        return site(main, details)(path)

    with HostileStargate(answer) as fake:
        out = tmp_path / "c.tar.gz"
        rc = capture_main(["--target", fake.target, "--stargate.target", "127.0.0.1", "-o", str(out)])
    assert rc == 0
    cap = read(str(out))
    m = cap.manifest
    assert m["exporter"] == "stargate-exporter" and m["version"] and m["revision"] and m["created"]
    assert m["up"] is True and m["vdisks"] == 3 and m["anonymized"] is True
    pages = m["pages"]
    assert [p["kind"] for p in pages].count("main") == 1 and len(pages) == 4
    for p in pages:
        assert p["url"].startswith("http://198.18.0.1:")
        assert p["build"] == "el7.3-release-euphrates-5.0.2-stable-5d92a1c6b8e4"
        assert p["seconds"] is not None and 0 <= p["seconds"] < 5 and p["requested_at"] >= 0
    bad = next(p for p in pages if "1001" in p["url"])
    assert bad["status"] == 500 and "HTTP 500" in bad["error"] and bad["file"] == "" and bad["bytes"] == 0
    good = next(p for p in pages if "1000" in p["url"])
    assert good["status"] == 200 and good["bytes"] == len(details[1000].encode()) and good["file"]
    _, metrics = replay(cap)
    text = metrics.decode()
    assert 'stargate_vdisk_detail_up{vdisk_id="1001"} 0.0' in text
    assert 'stargate_vdisk_detail_up{vdisk_id="1000"} 1.0' in text


def test_a_target_that_cannot_be_read_is_captured_too(tmp_path, capsys):
    """A CVM that refuses the connection: exit 1, and the capture says what happened (a failing
    CVM is worth reporting too); its replay is stargate_up 0."""
    with Canary() as closed:
        port = closed.port
    out = tmp_path / "c.tar.gz"
    rc = capture_main(["--target", f"127.0.0.1:{port}", "--stargate.target", "127.0.0.1", "-o", str(out)])
    assert rc == 1 and "probe DOWN" in capsys.readouterr().out
    cap = read(str(out))
    assert cap.manifest["up"] is False and "connection refused" in cap.manifest["error"]
    [page] = cap.manifest["pages"]
    assert page["kind"] == "main" and page["status"] is None and "connection refused" in page["error"]
    assert page["url"] == f"http://198.18.0.1:{port}/" and "127.0.0.1" not in json.dumps(cap.manifest)
    result, metrics = replay(cap)
    assert not result.up and "stargate_up 0.0" in metrics.decode()


def test_capture_fetches_only_what_the_allow_list_allows(tmp_path, capsys):
    with Canary() as canary:
        out = tmp_path / "c.tar.gz"
        target = f"127.0.0.1:{canary.port}"
        rc = capture_main(["--target", target, "--stargate.target", "10.0.0.0/8", "-o", str(out)])
        assert rc == 2
        assert "not on the targets allow-list" in capsys.readouterr().err
        assert canary.connections == 0 and not out.exists()


def test_discovery_in_a_capture_follows_only_allowed_cvms(tmp_path):
    """The capture's discover=true is the probe's: a Cluster State CVM off the allow-list is
    never contacted."""
    main, details = real_pages(1)
    with Canary(host="127.0.0.2") as canary:
        listed = set_links(main, cluster=[f"http://127.0.0.2:{canary.port}"])
        with HostileStargate(site(listed, details)) as fake:
            cap, result = capture(fake.target, discover=True, policy=TargetPolicy(["127.0.0.1"]))
        assert canary.connections == 0
    assert result.up and [p.kind for p in cap.pages] == ["main", "detail"]


def test_exporter_serves_a_capture_with_replay(sim, tmp_path):
    target = sim.urls["cvm-1"].split("://")[1]
    path, _ = captured(sim, target, False, tmp_path)
    cap = read(path)
    srv = ExporterServer(
        make_app(8, {}, 5.0, cap.policy(), discovery_ports=cap.ports(), client=ReplayClient(cap)), "127.0.0.1", 0
    ).start()
    try:
        r = requests.get(srv.url + "/probe", params={"target": cap.target}, timeout=10)
        assert r.status_code == 200
        assert comparable(r.text) == comparable(cap.metrics)
        # Only the capture's hosts may be probed, and a page it does not hold is a failed fetch.
        assert requests.get(srv.url + "/probe", params={"target": "10.1.1.1"}, timeout=10).status_code == 400
        other = cap.target.rsplit(":", 1)[0] + ":1"
        r = requests.get(srv.url + "/probe", params={"target": other}, timeout=10)
        assert r.status_code == 200 and "stargate_up 0.0" in r.text
    finally:
        srv.stop()


def test_replay_command_prints_and_checks_the_metrics(sim, tmp_path, capsys):
    target = sim.urls["cvm-1"].split("://")[1]
    path, _ = captured(sim, target, False, tmp_path)
    assert replay_main([path]) == 0
    printed = capsys.readouterr().out
    assert comparable(printed) == comparable(read(path).metrics)
    assert replay_main([path, "--check"]) == 0
    wrong = tmp_path / "wrong.prom"
    wrong.write_text(printed.replace('vdisk_id="1000"} 9000.0', 'vdisk_id="1000"} 9001.0'))
    capsys.readouterr()
    assert replay_main([path, "--check", str(wrong)]) == 1
    out = capsys.readouterr().out
    assert "- stargate_vdisk_read_ops_per_second" in out and "+ stargate_vdisk_read_ops_per_second" in out


@pytest.mark.parametrize(
    "content, cause",
    [
        (b"not a tarball", "not a capture"),
        (None, "no manifest.json"),
    ],
)
def test_a_file_that_is_not_a_capture_is_one_line(tmp_path, capsys, content, cause):
    path = tmp_path / "bad.tar.gz"
    if content is None:
        with tarfile.open(path, "w:gz"):
            pass
    else:
        path.write_bytes(content)
    with pytest.raises(CaptureError, match=cause):
        read(str(path))
    assert replay_main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and cause in err
    assert cli_main(["--replay", str(path)]) == 2


def test_a_capture_is_read_without_extracting_anything(tmp_path, sim):
    """Members outside the manifest (or with hostile names) are never written to disk."""
    target = sim.urls["cvm-1"].split("://")[1]
    path, _ = captured(sim, target, False, tmp_path)
    hostile = tmp_path / "hostile.tar.gz"
    with tarfile.open(path) as src, tarfile.open(hostile, "w:gz") as dst:
        for m in src:
            dst.addfile(m, src.extractfile(m))
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = 2
        dst.addfile(info, io.BytesIO(b"hi"))
    cap = read(str(hostile))
    assert cap.target and not (tmp_path.parent / "escaped.txt").exists()


# ------------------------------------------------------------------------------- anonymizer
def test_anonymizer_is_consistent_and_keeps_numbers_and_versions():
    a = Anonymizer(redact=["Acme"])
    a.keep("el7.3-release-euphrates-5.10.0.1-stable-abc")
    a.host("cvm-1.acme.example")
    a.name("NFS:/ctr-1/vm-a/vm-a.vmdk (a4cd5576-8fd3-48e6-93c4-9f72698125b5)", "vdisk")
    a.name("vm-a")
    text = (
        "10.0.0.1:2009 10.0.0.2 10.0.0.1 [fd00::5]:2009 fd00::5 el7.3-release-euphrates-5.10.0.1-stable-abc "
        "20231114-22:13:20 GMT 1.2.3.4.5 A4CD5576-8FD3-48E6-93C4-9F72698125B5 a4cd5576-8fd3-48e6-93c4-9f72698125b5 "
        "http://cvm-1.acme.example:2009/x cvm-1.acme.example NFS:/ctr-1/vm-a/vm-a.vmdk vm-a vm-ab ACME 4096 0.5"
    )
    out = a.text(text)
    assert out == (
        "198.18.0.1:2009 198.18.0.2 198.18.0.1 [2001:db8::1]:2009 2001:db8::1 el7.3-release-euphrates-5.10.0.1-stable-abc "
        "20231114-22:13:20 GMT 1.2.3.4.5 00000000-0000-4000-8000-000000000001 00000000-0000-4000-8000-000000000001 "
        "http://host-1.invalid:2009/x host-1.invalid vdisk-1 name-1 vm-ab redacted-1 4096 0.5"
    )
    assert a.text(text) == out, "the same input, the same placeholder"
    # The same UUID written without dashes (a guest's disk serial) gets the same placeholder.
    assert a.text("a4cd55768fd348e693c49f72698125b5") == "00000000000040008000000000000001"
    # Names that are prefixes of one another, each as a whole word; addresses that are not ones.
    c = Anonymizer()
    c.name("node-1")
    c.name("Node-10")
    assert c.text("node-1 NODE-10 node-100 xnode-1 300.1.1.1 1.2.3") == "name-1 name-2 node-100 xnode-1 300.1.1.1 1.2.3"
    # A name with no letter is never learnt (numbers are data).
    b = Anonymizer()
    b.name("1000")
    b.name("127.0.0.1:2009")
    assert b.text("1000 x") == "1000 x" and b.replaced == {}


# ---------------------------------------------------------------- issue 33: planted spellings
def planted_pages() -> tuple[str, dict[int, str]]:
    """The simulator's pages with names in the spellings a page may write: a character
    reference, a name split by an inline tag, a named entity for a non-ASCII letter, a table the
    parser does not know naming addresses and UUIDs inside names, a percent-encoded link and a
    link to another host."""
    main, details = real_pages(3)
    spelled = {
        "NFS:30001000": "&#x41;CMEHEX-db",
        "NFS:30001001": "<b>SPLITCO</b>-db2",
        "NFS:30001002": "Z&uuml;rich-store",
    }
    for old, new in spelled.items():
        assert old in main
        main = main.replace(old, new)
        details = {k: v.replace(old, new) for k, v in details.items()}
    extra = (
        '<table width="100%" bgcolor="#d8d8d8"><tr><td><font>VM&nbsp;Disks</font></td></tr></table>\n'
        "<table><tr><th>VM Name</th><th>Host</th><th>Datastore</th><th>Link</th></tr>"
        "<tr><td>nfs-10.55.66.77</td><td>::ffff:10.77.88.99</td><td>backup_10.66.77.88</td>"
        '<td><a href="http://esx-secret.corp.example/ui">console</a></td></tr>'
        "<tr><td>PCTNAME-vm</td><td>vm_a1b2c3d4_1111_4222_8333_444455556666</td>"
        '<td>vma4cd5576-8fd3-48e6-93c4-9f72698125b5</td><td><a href="/vm?name=%50CTNAME-vm&amp;x=1">vm</a></td></tr>'
        "</table>\n"
    )
    return main.replace("</body>", extra + "</body>"), details


def test_every_planted_spelling_is_anonymized_and_the_values_kept(tmp_path):
    """Names written as character references, split by a tag, with a named entity; addresses
    and UUIDs inside names; an IPv4-mapped address; a link to another host and a percent-encoded
    one: none is in any member of the archive (as written or decoded), and the replay gives the
    live probe's lines with the same replacements (so the values are unchanged)."""
    from tests.captures.planted import CORES, survivors, values_by_name

    main, details = planted_pages()
    with HostileStargate(site(main, details)) as fake:
        result = probe(HttpClient(), fake.target, time.monotonic() + 10, policy=TargetPolicy(["127.0.0.1"]))
        assert result.up
        live_text = StargateCollector(result).render().decode()
        out = tmp_path / "c.tar.gz"
        assert capture_main(["--target", fake.target, "--stargate.target", "127.0.0.1", "-o", str(out)]) == 0
    # The live probe read the planted names, decoded (the test would prove nothing otherwise).
    for name in ("ACMEHEX-db", "SPLITCO-db2", "Zürich-store"):
        assert f'"{name}"' in live_text, name
    planted = {k: v for k, v in CORES.items() if "JSON" not in k and "slash" not in k}
    assert survivors(str(out), planted) == []
    cap = read(str(out))
    _, metrics = replay(cap)
    got = comparable(metrics.decode())
    assert got == comparable(cap.metrics)
    # Labels changed, values not: every metric has the live probe's values, line for line.
    live = comparable(live_text)
    assert len(got) == len(live) and values_by_name(got) == values_by_name(live)
    assert sorted(re.findall(r'vdisk_name="([^"]*)"', metrics.decode())) == ["vdisk-1", "vdisk-2", "vdisk-3"]


def test_anonymizer_matches_decoded_text_and_writes_placeholders_raw():
    """Names learnt decoded are found in every spelling of a source, and the placeholder takes
    the place of the whole spelling (escapes included): JSON stays JSON, a page keeps its tags."""
    a = Anonymizer()
    for name in ("ACMEHEX-db", "SPLITCO-db2", "ACMEJSON-vm", "grp/SLASHVM", "Zürich-store", "PCTNAME-vm"):
        a.name(name)
    page = (
        "<td>&#x41;CMEHEX-db</td><td><b>SPLITCO</b>-db2</td><td>Z&uuml;rich-store</td>"
        '<a href="/vm?n=%50CTNAME-vm&amp;x=1">PCTNAME&#45;vm</a>'
    )
    assert a.text(page, markup=True) == (
        '<td>name-1</td><td><b>name-2</b></td><td>name-5</td><a href="/vm?n=name-6&amp;x=1">name-6</a>'
    )
    doc = r'{"a":"\u0041CMEJSON-vm","b":"grp\/SLASHVM","c":"Z\u00fcrich-store","d":"x\"y","e":"caf\u00e9"}'
    out = a.text(doc)
    assert out == r'{"a":"name-3","b":"name-4","c":"name-5","d":"x\"y","e":"caf\u00e9"}'
    assert json.loads(out)["d"] == 'x"y'  # escapes that name nothing are kept as written
    # Addresses and UUIDs inside names; an IPv4-mapped address whole; UUIDs with a prefix or
    # underscores, in the separators they were written with.
    b = Anonymizer()
    text = (
        "nfs-10.55.66.77 backup_10.66.77.88 ::ffff:10.77.88.99 vma4cd5576-8fd3-48e6-93c4-9f72698125b5 "
        "vm_a1b2c3d4_1111_4222_8333_444455556666 1.2.3.4.5 v5.10.0.1"
    )
    assert b.text(text) == (
        "nfs-198.18.0.1 backup_198.18.0.2 2001:db8::1 vm00000000-0000-4000-8000-000000000001 "
        "vm_00000000_0000_4000_8000_000000000002 1.2.3.4.5 v198.18.0.3"
    )
    # URL hosts of a whole answer, escaped or not; XML namespaces are standards, not the site.
    c = Anonymizer()
    c.learn_text(
        r'<e xmlns:s="http://schemas.xmlsoap.org/soap/envelope/">{"u":"https:\/\/esx-9.corp.example\/ui"}'
        r"http://user@vc.corp.example:443/sdk</e>"
    )
    assert c.text(r'"https:\/\/esx-9.corp.example\/ui" vc.corp.example schemas.xmlsoap.org') == (
        r'"https:\/\/host-2.invalid\/ui" host-1.invalid schemas.xmlsoap.org'
    )


def test_free_text_is_opt_in_and_keeps_standard_hosts():
    text = (
        r'{"m":"mail bob.smith@corp.example.com about C:\\Users\\bob\\plan.docx on \\\\fs01\\share\\x '
        r'at db-7.corp.example.com, GET /api?user=bob&page=2 xmlns=http://www.w3.org/2001/XMLSchema"}'
    )
    assert Anonymizer().text(text) == text  # off by default: none of these is a learnt name
    a = Anonymizer(free_text=True)
    out = a.text(text)
    assert out == (
        r'{"m":"mail mail-1@example.invalid about winpath-1 on winpath-2 '
        r'at host-1.invalid, GET /api?user=value-1&page=2 xmlns=http://www.w3.org/2001/XMLSchema"}'
    )
    assert json.loads(out)["m"].startswith("mail mail-1@")
    assert a.summary() == "1 email, 1 host, 1 value, 2 winpath"
