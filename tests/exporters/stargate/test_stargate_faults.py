"""Fault suite of the Stargate exporter (issues 13 and 14): a hostile fake Stargate and canary
servers on loopback, the exporter serving real HTTP on loopback.

For every fault: the probe answers within the deadline plus 0.5 s (Prometheus' scrape timeout),
with the right ``stargate_up`` (or per-vdisk ``stargate_vdisk_detail_up``), a log line naming the
target and the cause, never HTTP 500, no duplicate series, and an exposition promtool accepts.
Every refused fetch (foreign links, unlisted targets, other schemes, other ports) is proved by a
canary server that records any connection and must record none.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from ioparallax.exporters.common.web.server import ExporterServer
from ioparallax.exporters.stargate.address import TargetPolicy
from ioparallax.exporters.stargate.cli import make_app
from ioparallax.exporters.stargate.client import Limits
from tests.exporters.stargate.hostile import (
    Canary,
    HostileStargate,
    huge,
    real_pages,
    response,
    set_bucket,
    set_cell,
    set_links,
    trickle,
)
from tests.support import promtool_check_metrics

SCRAPE_TIMEOUT = 2.0  # the header Prometheus sends; the exporter's deadline is 0.5 s less
MB50 = 50 * 1024 * 1024


@pytest.fixture(scope="module")
def pages():
    main, details = real_pages(3)
    return main, details


def detail_answer(details):
    def answer(path: str) -> bytes:
        vid = int(path.split("id=")[1].split("&")[0])
        return response(details[vid].encode())

    return answer


def site(main: str | bytes, details, **overrides):
    """An answer function: ``/`` -> main page, detail paths -> details; ``overrides`` by path
    prefix ('/' or '/vdisk_stats') -> a function of the path returning the Answer."""
    body = main.encode() if isinstance(main, str) else main
    det = detail_answer(details)

    def answer(path: str):
        kind = "/" if path == "/" else "/vdisk_stats"
        if kind in overrides:
            return overrides[kind](path)
        return response(body) if kind == "/" else det(path)

    return answer


def answer_set_later(path: str) -> bytes:
    """The answer of a fake whose pages must name ports not known yet: the test sets
    ``fake.answer`` before the exporter asks anything."""
    raise AssertionError(f"{path} asked before the test set the fake's answer")


@contextlib.contextmanager
def fake_between_canaries() -> Iterator[tuple[HostileStargate, Canary, Canary]]:
    """A fake Stargate (its answer set later), a canary at the fake's port on another loopback
    address and one on another port of 127.0.0.1: where a link the exporter must refuse leads."""
    with (
        HostileStargate(answer_set_later) as fake,
        Canary("127.0.0.2", fake.port) as other_host,
        Canary("127.0.0.1") as other_port,
    ):
        yield fake, other_host, other_port


@pytest.fixture
def exporter():
    """A factory: an exporter with the given allow-list, limits and discovery ports."""
    servers = []

    def make(policy: TargetPolicy | None = None, limits: Limits = Limits(), ports: tuple[int, ...] = ()):
        srv = ExporterServer(
            make_app(4, {}, 10.0, policy or TargetPolicy(["127.0.0.1"]), limits, ports), "127.0.0.1", 0
        ).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.stop()


def scrape(srv, target: str, timeout: float = SCRAPE_TIMEOUT, **params) -> tuple[int, str, float]:
    """One probe as Prometheus sends it; every probe must answer within the deadline (the
    timeout less 0.5 s) plus 0.5 s."""
    start = time.monotonic()
    r = requests.get(
        srv.url + "/probe",
        params={"target": target, **params},
        headers={"X-Prometheus-Scrape-Timeout-Seconds": str(timeout)},
        timeout=30,
    )
    took = time.monotonic() - start
    assert took < timeout, f"probe of {target!r} took {took:.2f} s, past the deadline plus 0.5 s"
    return r.status_code, r.text, took


def series(text: str) -> list[tuple[str, tuple]]:
    return [
        (s.name, tuple(sorted(s.labels.items()))) for fam in text_string_to_metric_families(text) for s in fam.samples
    ]


def value(text: str, name: str, **labels) -> float:
    got = [
        s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(got) == 1, (name, labels, got)
    return got[0]


def check_exposition(text: str) -> None:
    """No duplicate series, histograms never decrease, and promtool accepts it."""
    dupes = [k for k, n in Counter(series(text)).items() if n > 1]
    assert not dupes, dupes
    buckets: dict[tuple, list[tuple[float, float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.endswith("_bucket"):
                key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")))
                buckets.setdefault(key, []).append((float(s.labels["le"]), s.value))
    for key, points in buckets.items():
        counts = [c for _, c in sorted(points)]
        assert counts == sorted(counts), (key, counts)
    result = promtool_check_metrics(text)
    assert result.returncode == 0, result.stdout + result.stderr


def logged(caplog, *words: str) -> list[str]:
    msgs = [r.getMessage() for r in caplog.records if all(w in r.getMessage() for w in words)]
    assert msgs, f"no log line with {words}:\n{caplog.text}"
    return msgs


def probe_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("stargate-probe")]


# ------------------------------------------------------------------ the target's server misbehaves
def _trickle_body(main, details):
    body = main.encode()
    return site(
        main,
        details,
        **{"/": lambda p: iter([response(b"", headers=[("Content-Length", str(len(body)))]), *trickle(body[:200])])},
    )


FAULTS = {
    # mode: (answer builder, cause in the log line)
    "trickle_body": (_trickle_body, "deadline exceeded"),
    "trickle_headers": (
        lambda m, d: site(m, d, **{"/": lambda p: trickle(response(m.encode())[:300])}),
        "deadline exceeded",
    ),
    "trickle_detail": (
        lambda m, d: site(m, d, **{"/vdisk_stats": lambda p: trickle(response(d[1000].encode()))}),
        "vdisk detail views pending",
    ),
    "content_length_x": (
        lambda m, d: site(m, d, **{"/": lambda p: response(m.encode(), headers=[("Content-Length", "x")])}),
        "bad Content-Length",
    ),
    "content_length_doubled": (
        lambda m, d: site(
            m,
            d,
            **{
                "/": lambda p: response(
                    m.encode(), headers=[("Content-Length", str(len(m))), ("Content-Length", str(len(m) + 5))]
                )
            },
        ),
        "bad Content-Length",
    ),
    "bad_status_line": (lambda m, d: site(m, d, **{"/": lambda p: b"HTTP/1.1 abc\r\n\r\n"}), "BadStatusLine"),
    "header_flood": (
        lambda m, d: site(m, d, **{"/": lambda p: response(m.encode(), headers=[(f"X-{i}", "y") for i in range(200)])}),
        "more than 100 headers",
    ),
    "huge_page_with_length": (lambda m, d: site(m, d, **{"/": lambda p: huge(MB50, True)}), "body_size_limit"),
    "huge_page_streamed": (lambda m, d: site(m, d, **{"/": lambda p: huge(MB50, False)}), "body_size_limit"),
    "huge_detail_page": (lambda m, d: site(m, d, **{"/vdisk_stats": lambda p: huge(MB50, False)}), "body_size_limit"),
}


@pytest.mark.parametrize("mode", sorted(FAULTS))
def test_misbehaving_server_gives_up_0_within_the_deadline(mode, pages, exporter, caplog):
    build, cause = FAULTS[mode]
    caplog.set_level(logging.WARNING)
    with HostileStargate(build(*pages)) as fake:
        srv = exporter()
        status, text, took = scrape(srv, fake.target)
    assert status == 200, text
    assert took < SCRAPE_TIMEOUT, f"probe took {took:.2f} s, past the deadline plus 0.5 s"
    if mode == "huge_detail_page":
        # A detail view over the limit costs that vdisk only.
        assert value(text, "stargate_up") == 1
        assert {value(text, "stargate_vdisk_detail_up", vdisk_id=str(v)) for v in (1000, 1001, 1002)} == {0.0}
    else:
        assert value(text, "stargate_up") == 0
        assert not [s for s in series(text) if s[0].startswith("stargate_vdisk_")], "no vdisk values"
    logged(caplog, fake.target, cause)
    check_exposition(text)


def test_abandoned_fetches_end_soon_after_the_deadline(pages, exporter):
    """A trickling detail page: the probe does not wait for its fetch threads, and their sockets
    are shut down at the deadline, so ten such probes leave no busy thread behind."""
    main, details = pages
    with HostileStargate(
        site(main, details, **{"/vdisk_stats": lambda p: trickle(response(details[1000].encode()))})
    ) as fake:
        srv = exporter()
        for _ in range(3):
            status, text, took = scrape(srv, fake.target, timeout=1.0)
            assert status == 200 and took < 1.0 and value(text, "stargate_up") == 0
        end = time.monotonic() + 1.5
        while probe_threads() and time.monotonic() < end:
            time.sleep(0.05)
        assert not probe_threads(), probe_threads()


# -------------------------------------------------------------------------------- garbage values
def test_garbage_cells_reject_their_row_only(pages, exporter, caplog):
    main, details = pages
    bad = set_cell(main, 1000, "Ops/s - Read", "nan")
    bad = set_cell(bad, 1001, "KB/s - Write", "1e400")
    bad = set_cell(bad, 1002, "Avg qlen", "-5")
    caplog.set_level(logging.WARNING)
    with HostileStargate(site(bad, details)) as fake:
        status, text, took = scrape(exporter(), fake.target)
    assert status == 200 and took < SCRAPE_TIMEOUT
    assert value(text, "stargate_up") == 1
    assert value(text, "stargate_rejected_rows") == 3
    assert not [s for s in series(text) if s[0].startswith("stargate_vdisk_")]
    for vid, cause in ((1000, "not finite"), (1001, "not finite"), (1002, "negative")):
        logged(caplog, fake.target, f"vdisk {vid}", cause)
    check_exposition(text)


def test_odd_vdisk_ids_reject_their_row_only(pages, exporter, caplog):
    main, details = pages
    bad = set_cell(set_cell(main, 1000, "VDisk Id", "²"), 1001, "VDisk Id", "9" * 4301)
    caplog.set_level(logging.WARNING)
    with HostileStargate(site(bad, details)) as fake:
        status, text, _ = scrape(exporter(), fake.target)
    assert status == 200, text
    assert value(text, "stargate_up") == 1 and value(text, "stargate_rejected_rows") == 2
    assert value(text, "stargate_vdisk_detail_up", vdisk_id="1002") == 1
    assert {dict(s[1]).get("vdisk_id") for s in series(text) if s[0].startswith("stargate_vdisk_")} == {"1002"}
    logged(caplog, fake.target, "not a linked integer")
    check_exposition(text)


def test_garbage_detail_views_mark_their_vdisk_only(pages, exporter, caplog):
    main, details = pages
    bad = {
        **details,
        1000: set_bucket(details[1000], "Frontend Read Latency", "-5"),
        1001: set_bucket(details[1001], "Write Size Distribution", "nan"),
    }
    caplog.set_level(logging.WARNING)
    with HostileStargate(site(main, bad)) as fake:
        status, text, _ = scrape(exporter(), fake.target)
    assert status == 200
    assert value(text, "stargate_up") == 1 and value(text, "stargate_rejected_rows") == 2
    assert [value(text, "stargate_vdisk_detail_up", vdisk_id=str(v)) for v in (1000, 1001, 1002)] == [0, 0, 1]
    assert not [
        s for s in series(text) if s[0].startswith("stargate_vdisk_read_latency") and ("vdisk_id", "1000") in s[1]
    ]
    assert value(text, "stargate_vdisk_read_latency_seconds_gcount", vdisk_id="1002") >= 0
    logged(caplog, fake.target, "vdisk 1000", "negative")
    logged(caplog, fake.target, "vdisk 1001", "not finite")
    check_exposition(text)


def test_non_ascii_vdisk_links_are_refused_per_vdisk(pages, exporter, caplog):
    main, details = pages
    caplog.set_level(logging.WARNING)
    with HostileStargate(site(set_links(main, vdisk_href=lambda h: h + "&x=é"), details)) as fake:
        status, text, _ = scrape(exporter(), fake.target)
        assert fake.requests == ["/"]
    assert status == 200 and value(text, "stargate_up") == 1
    assert value(text, "stargate_vdisk_detail_up", vdisk_id="1000") == 0
    logged(caplog, fake.target, "vdisk 1000", "not ASCII")
    check_exposition(text)


# ----------------------------------------------------------------------- fetches go only where allowed
def test_foreign_vdisk_links_are_never_followed(pages, exporter, caplog):
    """Links to another host on the same port, to the same host on another port, to another
    scheme: refused per vdisk, and the canaries behind them receive nothing. The allow-list
    (all of loopback) would admit them: the same-server rule alone refuses them."""
    main, details = pages
    with fake_between_canaries() as (fake, other_host, other_port):
        hrefs = {
            "1000": f"http://127.0.0.2:{fake.port}",
            "1001": f"http://127.0.0.1:{other_port.port}",
            "1002": f"gopher://127.0.0.1:{other_port.port}",
        }
        page = set_links(main, vdisk_href=lambda h: hrefs[h.split("id=")[1].split("&")[0]] + h)
        fake.answer = site(page, details)
        caplog.set_level(logging.WARNING)
        status, text, _ = scrape(exporter(TargetPolicy.loopback()), fake.target)
        time.sleep(0.2)
        assert other_host.connections == 0 and other_port.connections == 0
        assert fake.requests == ["/"]
    assert status == 200 and value(text, "stargate_up") == 1
    assert [value(text, "stargate_vdisk_detail_up", vdisk_id=v) for v in ("1000", "1001", "1002")] == [0, 0, 0]
    logged(caplog, fake.target, "not on http://", "same server only")
    logged(caplog, fake.target, "scheme 'gopher' not allowed")
    check_exposition(text)


def test_discovery_follows_only_listed_cvms_on_the_stargate_port(pages, exporter, caplog):
    main, details = pages
    with fake_between_canaries() as (fake, unlisted, other_port):
        links = [
            f"http://127.0.0.2:{fake.port}",  # a host not on the allow-list
            f"http://127.0.0.1:{other_port.port}",  # not the Stargate port
            f"gopher://127.0.0.1:{fake.port}",
            "file:///etc/passwd",
            f"http://user@127.0.0.1:{other_port.port}/",
            "http://[::1",
        ]
        fake.answer = site(set_links(main, cluster=links), details)
        caplog.set_level(logging.WARNING)
        status, text, took = scrape(exporter(TargetPolicy(["127.0.0.1"])), fake.target, discover="true")
        time.sleep(0.2)
        assert unlisted.connections == 0 and other_port.connections == 0
    assert status == 200 and took < SCRAPE_TIMEOUT
    assert value(text, "stargate_up") == 1
    assert [dict(s[1])["cvm"] for s in series(text) if s[0] == "stargate_cvm_up"] == [fake.target]
    logged(caplog, fake.target, "not on the targets allow-list")
    logged(caplog, fake.target, "is not the Stargate port")
    logged(caplog, fake.target, "scheme 'gopher' not allowed")
    logged(caplog, fake.target, "scheme 'file' not allowed")
    logged(caplog, fake.target, "user information")
    check_exposition(text)


def test_duplicate_cluster_state_entries_are_probed_once(pages, exporter):
    main, details = pages
    with HostileStargate(answer_set_later) as a, HostileStargate(site(main, details)) as b:
        links = [
            f"http://{a.target}",
            f"http://{b.target}",
            f"http://{b.target}/",
            f"HTTP://{b.target}",
            f"http://{b.target}",
        ]
        a.answer = site(set_links(main, cluster=links), details)
        status, text, _ = scrape(exporter(ports=(b.port,)), a.target, discover="true")
        assert b.requests.count("/") == 1
    assert status == 200 and value(text, "stargate_up") == 1
    assert sorted(dict(s[1])["cvm"] for s in series(text) if s[0] == "stargate_cvm_up") == sorted([a.target, b.target])
    # Both list the same vdisks: merged by id, each once.
    assert sorted(dict(s[1])["vdisk_id"] for s in series(text) if s[0] == "stargate_vdisk_info") == [
        "1000",
        "1001",
        "1002",
    ]
    check_exposition(text)


def test_trickling_cluster_cvm_gives_up_0_within_the_deadline(pages, exporter, caplog):
    main, details = pages
    caplog.set_level(logging.WARNING)
    with (
        HostileStargate(answer_set_later) as a,
        HostileStargate(site(main, details, **{"/": lambda p: trickle(response(main.encode()))})) as b,
    ):
        a.answer = site(set_links(main, cluster=[f"http://{b.target}"]), details)
        status, text, _ = scrape(exporter(ports=(b.port,)), a.target, discover="true")
    assert status == 200 and value(text, "stargate_up") == 0
    assert not [s for s in series(text) if s[0].startswith("stargate_vdisk_")]
    logged(caplog, a.target, "deadline exceeded", "1 of 1 Cluster State CVM main pages pending")
    check_exposition(text)


def test_unlisted_target_is_refused_with_400_and_a_log_line(exporter, caplog):
    caplog.set_level(logging.WARNING)
    with Canary("127.0.0.2") as canary:
        srv = exporter(TargetPolicy(["127.0.0.1", "cvm-*.example.com"]))
        for target in (f"127.0.0.2:{canary.port}", f"http://127.0.0.2:{canary.port}/", f"localhost:{canary.port}"):
            status, text, _ = scrape(srv, target)
            assert status == 400 and "allow-list" in text, (target, status, text)
        time.sleep(0.2)
        assert canary.connections == 0
    logged(caplog, f"127.0.0.2:{canary.port}", "refused", "allow-list")


@pytest.mark.parametrize(
    "target, cause",
    [
        ("gopher://127.0.0.1:{port}/", "scheme 'gopher' not allowed"),
        ("file:///etc/passwd", "scheme 'file' not allowed"),
        ("http://127.0.0.1:{port}/é", "not ASCII"),
        ("http://[::1]:abc/", "not a URL"),
        ("a" * 70 + ".example.com", "DNS label of 70 characters"),
        ("127.0.0.1:{port}\x00", "control character"),
        ("http://127.0.0.1:{port}/%00", "NUL"),
        ("127.0.0.1:{port}\nlevel=error msg=forged", "control character"),
        ("http://user:pw@127.0.0.1:{port}/", "user information"),
        ("127.1:{port}", "neither a dotted IPv4 address"),
        ("127.0.0.1:99999", "not a URL"),
    ],
)
def test_malformed_targets_give_up_0_and_no_connection(target, cause, exporter, caplog):
    caplog.set_level(logging.WARNING)
    with Canary("127.0.0.1") as canary:
        status, text, _ = scrape(exporter(TargetPolicy.loopback()), target.format(port=canary.port))
        time.sleep(0.1)
        assert canary.connections == 0
    assert status == 200, text
    assert value(text, "stargate_up") == 0
    msgs = logged(caplog, "bad target", cause)
    assert all("\n" not in m for m in msgs), "a target cannot add a log line"
    check_exposition(text)


def test_page_cap_gives_up_0_without_fetching_details(pages, exporter, caplog):
    main, details = pages
    caplog.set_level(logging.WARNING)
    with HostileStargate(site(main, details)) as fake:
        status, text, _ = scrape(exporter(limits=Limits(max_pages=3)), fake.target)
        assert fake.requests == ["/"]
    assert status == 200 and value(text, "stargate_up") == 0
    logged(caplog, fake.target, "max_pages_per_probe (3)")


# ------------------------------------------------------------------- the real process, bounded memory
def _vm_hwm_kib(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_exporter_process_refuses_unlisted_targets_and_never_buffers_a_huge_page(pages, tmp_path):
    """The stargate-exporter program with a config allow-list: an unlisted target gets 400 and a
    log line, and a 50 MB page (streamed without Content-Length) fails the probe at
    body_size_limit without the process' peak memory growing by anything near 50 MB."""
    from tests.support import ManagedProcess, free_port, venv_tool, wait_for_http

    main, details = pages
    cfg = tmp_path / "stargate.yml"
    cfg.write_text("targets: [127.0.0.1]\nbody_size_limit: 1MiB\n")
    port = free_port()
    proc = ManagedProcess(
        "stargate-exporter",
        [venv_tool("stargate-exporter"), f"--web.listen-address=127.0.0.1:{port}", f"--config.file={cfg}"],
        tmp_path,
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", proc=proc)
        with HostileStargate(site(main, details)) as fake, Canary("127.0.0.2") as canary:

            def get(target):
                return requests.get(
                    f"http://127.0.0.1:{port}/probe",
                    params={"target": target},
                    headers={"X-Prometheus-Scrape-Timeout-Seconds": "5"},
                    timeout=30,
                )

            r = get(fake.target)  # a normal probe first: the baseline peak
            assert r.status_code == 200 and value(r.text, "stargate_up") == 1
            before = _vm_hwm_kib(proc.pid)
            fake.answer = site(main, details, **{"/": lambda p: huge(MB50, False)})
            r = get(fake.target)
            assert r.status_code == 200 and value(r.text, "stargate_up") == 0
            growth_mb = (_vm_hwm_kib(proc.pid) - before) / 1024
            assert growth_mb < 10, f"peak RSS grew by {growth_mb:.1f} MB for a 50 MB page"
            r = get(f"127.0.0.2:{canary.port}")
            assert r.status_code == 400
            time.sleep(0.2)
            assert canary.connections == 0
    finally:
        proc.stop()
    log_text = proc.log_path.read_text()
    assert "body_size_limit (1048576 bytes)" in log_text and fake.target in log_text
    assert f"127.0.0.2:{canary.port} refused" in log_text and "allow-list" in log_text


def test_the_canary_sees_a_connection():
    """The control for every 'no connection' assertion above: a canary does record one."""
    with Canary("127.0.0.2") as canary:
        with pytest.raises(requests.RequestException):
            requests.get(f"http://127.0.0.2:{canary.port}/", timeout=2)
        time.sleep(0.1)
        assert canary.connections == 1 and canary.data[0].startswith(b"GET / HTTP/1.1")
