"""The servers: one per CVM, hosting and moves, fault injection (API and HTTP), keep-alive, CLI."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from bs4 import BeautifulSoup

from ioparallax.simulators.stargate.server import StargateCluster
from tests.support import free_port, run_entry_point, started_and_stopped, venv_tool, wait_for_http

from .stargate_sim_helpers import EPOCH, moving_scenario

NBSP = "\xa0"


class Clock:
    def __init__(self, t: float):
        self.t = float(t)

    def __call__(self) -> float:
        return self.t


def hosted_rows(html: str) -> dict[int, str]:
    """vdisk id -> detail href, from the Hosted VDisks table found by its banner."""
    soup = BeautifulSoup(html, "lxml")
    for t in soup.find_all("table"):
        tds = t.find_all("td")
        if len(tds) == 1 and tds[0].get_text() in (f"Hosted{NBSP}VDisks", f"Hosted{NBSP}Active{NBSP}VDisks"):
            table = t.find_next_sibling("table")
            return {int(a.get_text()): a["href"] for a in table.find_all("a")}
    raise AssertionError("no Hosted VDisks table")


@pytest.fixture
def cluster():
    def start(scenario, **kw) -> StargateCluster:
        return StargateCluster(scenario, **{"clock": Clock(EPOCH), **kw}).start()

    yield from started_and_stopped(start)


def test_each_cvm_shows_only_its_vdisks(cluster):
    sim = cluster("clean-oltp")
    seen = {}
    for name, url in sim.urls.items():
        r = requests.get(url + "/", timeout=5)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
        rows = hosted_rows(r.text)
        assert sorted(rows) == sorted(d.vdisk_id for d in sim.hosted(name))
        for vid in rows:
            assert vid not in seen
            seen[vid] = name
    assert sorted(seen) == sorted(d.vdisk_id for d in sim.scenario.disks)


def test_moved_vdisk_shows_on_the_other_cvm(cluster):
    sc = moving_scenario()
    base = EPOCH - EPOCH % 600
    clock = Clock(base + 299)
    sim = cluster(sc, clock=clock)
    urls = sim.urls
    assert 1000 in hosted_rows(requests.get(urls["cvm-1"], timeout=5).text)
    assert 1000 not in hosted_rows(requests.get(urls["cvm-2"], timeout=5).text)
    href = hosted_rows(requests.get(urls["cvm-1"], timeout=5).text)[1000]
    clock.t = base + 300
    assert 1000 not in hosted_rows(requests.get(urls["cvm-1"], timeout=5).text)
    rows = hosted_rows(requests.get(urls["cvm-2"], timeout=5).text)
    assert 1000 in rows and rows[1000] == href
    r = requests.get(urls["cvm-1"] + href, timeout=5)
    assert r.status_code == 404 and "VDisk 1000 is not hosted by this Stargate" in r.text
    r = requests.get(urls["cvm-2"] + href, timeout=5)
    assert r.status_code == 200 and "VDisk 1000 Read Source" in r.text
    clock.t = base + 600  # next period: back on cvm-1
    assert 1000 in hosted_rows(requests.get(urls["cvm-1"], timeout=5).text)


def test_detail_urls_must_be_followed_not_built(cluster):
    sim = cluster("zero-heavy")  # 2016 build
    url = sim.urls["cvm-1"]
    href = hosted_rows(requests.get(url, timeout=5).text)[1000]
    assert href == "/vdisk_stats?id=1000&detail=true"
    assert requests.get(url + href, timeout=5).status_code == 200
    assert requests.get(url + "/vdisk_stats?vdisk_id=1000", timeout=5).status_code == 404
    r = requests.get(url + "/vdisk_stats", timeout=5)  # no query: every hosted vdisk
    assert r.status_code == 200 and "VDisk 1000 Ops and Randomness" in r.text
    assert requests.get(url + "/nope", timeout=5).status_code == 404


def test_keep_alive_serves_several_requests_on_one_connection(cluster):
    sim = cluster("zero-heavy")
    port = sim.cvms["cvm-1"].port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        for path in ("/", "/vdisk_stats?id=1000&detail=true", "/h/vars?format=text"):
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
            assert resp.status == 200 and int(resp.getheader("Content-Length")) == len(body)
            assert resp.version == 11 and not resp.will_close
    finally:
        conn.close()


def test_vars_text_regex_and_prism_over_http(cluster):
    sim = cluster("postgres", history_start=EPOCH - 100)
    url = sim.urls["cvm-1"]
    r = requests.get(url + "/h/vars?format=text", timeout=5)
    assert r.headers["Content-Type"].startswith("text/plain")
    lines = dict(line.rsplit(" ", 1) for line in r.text.splitlines())
    assert int(lines["stargate/vdisk/total/oplog_bytes"]) == round(
        sum(sim.view(d).oplog_bytes for d in sim.hosted("cvm-1"))
    )
    r = requests.get(url + "/h/vars", params={"format": "text", "regex": "oplog_bytes$"}, timeout=5)
    assert r.text and all(line.split()[0].endswith("oplog_bytes") for line in r.text.splitlines())
    assert requests.get(url + "/h/vars", params={"format": "text", "regex": "("}, timeout=5).status_code == 400
    assert "<pre>" in requests.get(url + "/h/vars", timeout=5).text
    doc = requests.get(url + "/PrismGateway/services/rest/v2.0/virtual_disks", timeout=5).json()
    assert doc == sim.prism_virtual_disks()
    assert {e["uuid"] for e in doc["entities"]} == {d.vdisk_uuid for d in sim.scenario.disks}


# -- faults -----------------------------------------------------------------------------------


def test_fault_slow(cluster):
    sim = cluster("zero-heavy")
    sim.set_fault("cvm-1", "slow", delay=3)
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests.get(sim.urls["cvm-1"], timeout=0.5)
    assert requests.get(sim.urls["cvm-2"], timeout=5).status_code == 200  # only that CVM
    sim.clear_faults("cvm-1")
    assert requests.get(sim.urls["cvm-1"], timeout=5).status_code == 200
    with pytest.raises(ValueError):
        sim.set_fault("cvm-1", "slow")  # no delay


def test_a_client_hanging_up_leaves_no_traceback(cluster, capsys):
    """An exporter that gives up at its deadline resets the connection before the (slow) answer is
    written: the simulator goes on serving, and prints no traceback for it."""
    sim = cluster("zero-heavy")
    sim.set_fault("cvm-1", "slow", delay=0.3)
    host, port = urlsplit(sim.urls["cvm-1"]).hostname, urlsplit(sim.urls["cvm-1"]).port
    for _ in range(3):
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        s.close()
    time.sleep(1.0)  # the answers are written (and fail) after the delay
    sim.clear_faults("cvm-1")
    assert requests.get(sim.urls["cvm-1"], timeout=5).status_code == 200
    assert "Traceback" not in capsys.readouterr().err


def test_fault_http_500_only_detail_and_one_vdisk(cluster):
    sim = cluster(None, vdisk_count=3)
    url = sim.urls["cvm-1"]
    sim.set_fault("cvm-1", "http_500")
    assert requests.get(url, timeout=5).status_code == 500
    sim.set_fault("cvm-1", "http_500", only="detail")
    assert requests.get(url, timeout=5).status_code == 200
    assert requests.get(url + "/vdisk_stats?id=1001&detail=true", timeout=5).status_code == 500
    sim.set_fault("cvm-1", "http_500", vdisk=1001)
    assert requests.get(url + "/vdisk_stats?id=1001&detail=true", timeout=5).status_code == 500
    assert requests.get(url + "/vdisk_stats?id=1002&detail=true", timeout=5).status_code == 200
    assert requests.get(url + "/h/vars?format=text", timeout=5).status_code == 200
    assert sim.request_counts[("cvm-1", "/vdisk_stats")] == 3


def test_fault_truncated_cuts_inside_a_table(cluster):
    sim = cluster("zero-heavy")
    url = sim.urls["cvm-1"] + "/vdisk_stats?id=1000&detail=true"
    full = requests.get(url, timeout=5).content
    sim.set_fault("cvm-1", "truncated", only="detail")
    r = requests.get(url, timeout=5)
    assert r.status_code == 200 and int(r.headers["Content-Length"]) == len(r.content)
    body = r.content
    assert full.startswith(body) and len(body) < len(full)
    assert b"</html>" not in body
    assert body.rfind(b"<table") > body.rfind(b"</table>")  # ends inside an open table
    assert body.rfind(b"<tr>") > body.rfind(b"</tr>")  # ... in the middle of a row
    assert requests.get(sim.urls["cvm-1"], timeout=5).content.endswith(b"</html>\n")  # main page intact
    # abort: the full length is announced, the connection drops half way
    sim.set_fault("cvm-1", "truncated", abort=True)
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(url, timeout=5)


def test_fault_garbage(cluster):
    sim = cluster("zero-heavy")
    sim.set_fault("cvm-2", "garbage")
    r = requests.get(sim.urls["cvm-2"], timeout=5)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert b"<table" not in r.content and b"<html" not in r.content
    with pytest.raises(UnicodeDecodeError):
        r.content.decode("utf-8")


def test_fault_refused_and_back_on_the_same_port(cluster):
    sim = cluster("zero-heavy")
    url = sim.urls["cvm-1"]
    session = requests.Session()
    assert session.get(url, timeout=5).status_code == 200  # a kept-alive connection exists
    sim.set_fault("cvm-1", "refused")
    with pytest.raises(requests.exceptions.ConnectionError):
        session.get(url, timeout=5)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(url, timeout=5)
    assert requests.get(sim.urls["cvm-2"], timeout=5).status_code == 200
    sim.clear_faults()
    assert sim.urls["cvm-1"] == url
    assert requests.get(url, timeout=5).status_code == 200
    # with a duration it comes back by itself
    sim.set_fault("cvm-1", "refused", duration=0.3)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(url, timeout=5)
    assert wait_for_http(url, timeout=10).status_code == 200


def test_fault_control_over_http(cluster):
    sim = cluster("zero-heavy")
    one, two = sim.urls["cvm-1"], sim.urls["cvm-2"]
    r = requests.post(one + "/-/sim/fault", params={"cvm": "cvm-2", "mode": "http_500", "only": "main"}, timeout=5)
    assert r.status_code == 200
    assert requests.get(two, timeout=5).status_code == 500
    state = requests.get(one + "/-/sim/state", timeout=5).json()
    assert state["cvms"]["cvm-2"]["fault"]["mode"] == "http_500"
    assert state["period_second"] == EPOCH % 600 and state["cvms"]["cvm-1"]["hosted_vdisks"] == [1000]
    for bad in (
        {"mode": "explode"},
        {"cvm": "cvm-9", "mode": "slow", "delay": "1"},
        {"mode": "slow"},
        {"mode": "http_500", "only": "sideways"},
    ):
        r = requests.post(one + "/-/sim/fault", params=bad, timeout=5)
        assert r.status_code == 400 and r.text.strip()
    # refuse cvm-2 from cvm-1, then bring it back from cvm-1
    requests.post(one + "/-/sim/fault", params={"cvm": "cvm-2", "mode": "refused"}, timeout=5)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(two, timeout=5)
    assert requests.delete(one + "/-/sim/fault", params={"cvm": "cvm-2"}, timeout=5).status_code == 200
    assert requests.get(two, timeout=5).status_code == 200
    # without cvm=, the fault lands on the CVM asked; /-/sim/ itself is never faulted
    requests.post(one + "/-/sim/fault", params={"mode": "garbage"}, timeout=5)
    assert b"<html" not in requests.get(one, timeout=5).content
    assert requests.post(one + "/-/sim/clear", timeout=5).status_code == 200
    assert b"<html" in requests.get(one, timeout=5).content


def test_synthetic_vdisks_all_on_the_first_cvm(cluster):
    sim = cluster(None, vdisk_count=200)
    rows = hosted_rows(requests.get(sim.urls["cvm-1"], timeout=10).text)
    assert len(rows) == 200
    assert hosted_rows(requests.get(sim.urls["cvm-2"], timeout=5).text) == {}
    r = requests.get(sim.urls["cvm-1"] + rows[1199], timeout=5)
    assert r.status_code == 200 and "VDisk 1199 Write Destination" in r.text


# -- CLI --------------------------------------------------------------------------------------


def test_cli_serves_the_same_pages_as_the_api(processes, tmp_path: Path):
    urls_file = tmp_path / "urls.json"
    ports = [free_port() for _ in range(3)]
    argv = [venv_tool("stargate-simulator"), "clean-oltp", "--freeze-at", str(EPOCH)]
    for p in ports:
        argv += ["--port", str(p)]
    proc = processes.start("stargate-sim", argv + ["--urls-file", urls_file])
    wait_for_http(f"http://127.0.0.1:{ports[0]}/", proc=proc)
    deadline = time.monotonic() + 10
    while not urls_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    urls = json.loads(urls_file.read_text())
    assert urls == {f"cvm-{i + 1}": f"http://127.0.0.1:{p}" for i, p in enumerate(ports)}
    for name, url in urls.items():
        assert f"{name} {url}" in proc.output()
    api = StargateCluster("clean-oltp", clock=lambda: float(EPOCH), ports=ports)  # same clock, not started
    served = requests.get(urls["cvm-1"], timeout=5).text
    assert served == api.render_main("cvm-1")
    href = hosted_rows(served)[1000]
    assert requests.get(urls["cvm-1"] + href, timeout=5).text == api.render_detail("cvm-1", 1000)


def test_cli_help_and_errors():
    r = run_entry_point("stargate-simulator", ["--help"])
    assert r.returncode == 0 and "/-/sim/fault" in r.stdout and "--synthetic-vdisks" in r.stdout
    r = run_entry_point("stargate-simulator", ["no-such-scenario"])
    assert r.returncode == 2 and "no-such-scenario" in r.stderr
    r = run_entry_point("stargate-simulator", [])
    assert r.returncode == 2 and "scenario" in r.stderr
