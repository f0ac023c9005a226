"""The Stargate parser and exporter against the running Stargate simulator (all page builds)."""

import dataclasses
import functools
import logging
import time

import pytest
import requests
from hypothesis import HealthCheck, example, given, settings, strategies as st

from ioparallax.exporters.common.web.server import ExporterServer
from ioparallax.exporters.stargate.cli import main as cli_main, make_app
from ioparallax.exporters.stargate.parse import StargatePageError, canonical, parse_main_page, parse_vdisk_page
from ioparallax.simulators.scenario import load_scenario, parse_scenario
from ioparallax.simulators.stargate.server import StargateCluster
from ioparallax.yamlconf import ConfigError
from tests.exporters.stargate.support import load_mapping, target_url
from tests.support import late_allowance, promtool_check_metrics, scenario_data

FROZEN = 1_700_000_000.0


def scenario_with_build(name: str, build: int):
    sc = load_scenario(name)
    return dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, page_build=build))


@pytest.fixture(scope="module")
def zero_heavy():
    with StargateCluster("zero-heavy", clock=lambda: FROZEN) as cluster:
        yield cluster


def sim_ports(cluster) -> tuple[int, ...]:
    """The simulator's CVMs share one address, each on its own port: discovery may follow them
    there only when the exporter is told (discovery_ports), as for a real cluster on odd ports."""
    return tuple(int(u.rsplit(":", 1)[1]) for u in cluster.urls.values())


@pytest.fixture(scope="module")
def exporter(zero_heavy):
    srv = ExporterServer(
        make_app(8, {"1000": {"vm": "bench-01", "disk": "scsi0:1"}}, 5.0, discovery_ports=sim_ports(zero_heavy)),
        "127.0.0.1",
        0,
    ).start()
    yield srv
    srv.stop()


def scrape(exporter, target, timeout="4", **params):
    r = requests.get(
        exporter.url + "/probe",
        params={"target": target, **params},
        headers={"X-Prometheus-Scrape-Timeout-Seconds": timeout},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return r.text


def samples(text: str, name: str) -> dict[tuple, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def one(text, name, **labels):
    got = {k: v for k, v in samples(text, name).items() if all((lk, lv) in k for lk, lv in labels.items())}
    assert len(got) == 1, (name, labels, got)
    return next(iter(got.values()))


@pytest.mark.parametrize("build", [2014, 2015, 2016])
def test_parser_reads_every_build(build):
    sc = scenario_with_build("zero-heavy", build)
    with StargateCluster(sc, clock=lambda: FROZEN) as cluster:
        url = cluster.urls["cvm-1"] + "/"
        page = parse_main_page(requests.get(url, timeout=5).content, url)
        assert page.hosted_title == ("Hosted Active VDisks" if build == 2014 else "Hosted VDisks")
        assert sorted(u.rstrip("/") for u in page.cvm_urls) == sorted(cluster.urls.values())
        [row] = page.vdisks
        disk = next(d for d in sc.disks if str(d.vdisk_id) == row.vdisk_id)
        truth = cluster.trace.window(disk, cluster.trace.now(FROZEN), 3)
        assert row.read_ops_per_second == pytest.approx(truth.rate("read_ops"))
        assert row.read_bytes_per_second == pytest.approx(truth.rate("read_bytes"), rel=0.001)
        assert row.uuid == disk.vdisk_uuid
        detail = parse_vdisk_page(requests.get(row.href, timeout=5).content)
        assert detail.vdisk_id == row.vdisk_id
        zero = {"zero", "estore_zero", "oplog_zero"}
        zero_ratio = sum(r for n, (_, r) in detail.read_sources.items() if n in zero)
        assert zero_ratio == pytest.approx(0.357, abs=0.011)  # percents are whole numbers on the page
        assert sum(c for c in detail.read_latency.counts) == pytest.approx(truth.read_ops, abs=1)
        if build == 2015:
            assert "zero" in detail.read_sources and "extent_cache" in detail.read_sources
        if build == 2016:
            assert {"estore_zero", "oplog_zero"} <= set(detail.read_sources)
            assert detail.write_destinations["oplog_zero"][1] == pytest.approx(0.40, abs=0.005)


def test_probe_with_discovery_exports_each_vdisk_once(zero_heavy, exporter):
    cvm1 = zero_heavy.urls["cvm-1"].split("://")[1]
    text = scrape(exporter, cvm1, discover="true")
    assert one(text, "stargate_up") == 1
    infos = samples(text, "stargate_vdisk_info")
    ids = sorted(dict(k)["vdisk_id"] for k in infos)
    assert ids == sorted(str(d.vdisk_id) for d in zero_heavy.scenario.disks)
    # Mapping file labels reach the info metric.
    assert one(text, "stargate_vdisk_info", vdisk_id="1000") == 1
    assert ("vm", "bench-01") in next(k for k in infos if ("vdisk_id", "1000") in k)
    # Exact values from the scenario: 9000 reads/s of 8 KiB, zero share of read bytes 35.7 %.
    assert one(text, "stargate_vdisk_read_ops_per_second", vdisk_id="1000") == 9000
    assert one(text, "stargate_vdisk_read_bytes_per_second", vdisk_id="1000") == 9000 * 8192
    src = {
        dict(k)["source"]: v
        for k, v in samples(text, "stargate_vdisk_read_source_bytes_per_second").items()
        if ("vdisk_id", "1000") in k
    }
    zero = src["estore_zero"] + src["oplog_zero"]
    assert zero / sum(src.values()) == pytest.approx(0.357, abs=0.02)  # MB/s are whole numbers on the page
    assert one(text, "stargate_vdisk_write_destination_ratio", vdisk_id="1000", destination="oplog_zero") == 0.40
    assert one(text, "stargate_vdisk_read_latency_seconds_gcount", vdisk_id="1000") == 27000
    result = promtool_check_metrics(text)
    assert result.returncode == 0, result.stdout + result.stderr


def test_single_cvm_probe_shows_only_its_vdisks(zero_heavy, exporter):
    text = scrape(exporter, zero_heavy.urls["cvm-2"])
    hosted = [str(d.vdisk_id) for d in zero_heavy.scenario.disks if d.cvm_at(zero_heavy.trace.now(FROZEN)) == "cvm-2"]
    assert sorted(dict(k)["vdisk_id"] for k in samples(text, "stargate_vdisk_info")) == sorted(hosted)


@pytest.mark.parametrize(
    "mode, kw, cause",
    [
        ("http_500", {}, "HTTP 500"),
        ("garbage", {}, "cvm"),
        ("truncated", {}, "cvm"),
        ("slow", {"delay": 6}, "deadline exceeded"),
        ("refused", {}, "connection refused"),
    ],
)
def test_target_failures_give_up_0_and_a_log_line(mode, kw, cause, exporter, caplog):
    with StargateCluster("zero-heavy", clock=lambda: FROZEN) as cluster:
        target = cluster.urls["cvm-1"].split("://")[1]
        start = time.monotonic()
        assert one(scrape(exporter, target, timeout="3"), "stargate_up") == 1
        quick = time.monotonic() - start  # a whole probe with nothing to wait for, on this machine now
        cluster.set_fault("cvm-1", mode, **kw)
        caplog.set_level(logging.WARNING)
        start = time.monotonic()
        text = scrape(exporter, target, timeout="3")
        # By the 3 s scrape timeout, late by at most what a probe costs here (0.5 s on a quiet
        # machine), and always before the slow CVM's 6 s answer.
        took = time.monotonic() - start
        assert took < 3.0 + min(late_allowance(quick), 2.5), (took, quick)
        assert one(text, "stargate_up") == 0
        assert not samples(text, "stargate_vdisk_info"), "no vdisk values from a failed target"
        msgs = [r.getMessage() for r in caplog.records if target in r.getMessage()]
        assert msgs, caplog.text
        if cause != "cvm":
            assert any(cause in m for m in msgs), msgs
        cluster.clear_faults()


def test_failing_detail_page_marks_only_that_vdisk():
    with StargateCluster("postgres", clock=lambda: FROZEN) as cluster:
        exporter = ExporterServer(make_app(8, {}, 5.0, discovery_ports=sim_ports(cluster)), "127.0.0.1", 0).start()
        # both postgres vdisks on cvm-1? take the CVM that hosts the data disk
        data = cluster.scenario.disks[0]
        cvm = data.cvm_at(cluster.trace.now(FROZEN))
        cluster.set_fault(cvm, "http_500", only="detail", vdisk=data.vdisk_id)
        text = scrape(exporter, cluster.urls[cvm].split("://")[1], discover="true")
        assert one(text, "stargate_up") == 1
        assert one(text, "stargate_vdisk_detail_up", vdisk_id=str(data.vdisk_id)) == 0
        other = cluster.scenario.disks[1]
        assert one(text, "stargate_vdisk_detail_up", vdisk_id=str(other.vdisk_id)) == 1
        # The main-page values of the failing vdisk are still there.
        assert one(text, "stargate_vdisk_read_ops_per_second", vdisk_id=str(data.vdisk_id)) >= 0
        exporter.stop()


def test_moving_vdisk_is_counted_once():
    base = scenario_data(
        {
            "name": "vm1",
            "disks": [
                {
                    "cvm": "cvm-1",
                    "moves": [{"at": "30s", "to": "cvm-2"}],
                    "streams": [{"read_iops": 100, "write_iops": 0}],
                }
            ],
        },
        name="moving",
        cvms=("cvm-1", "cvm-2"),
    )
    sc = parse_scenario(base)
    t = [FROZEN - FROZEN % 60 + 29.5]
    with StargateCluster(sc, clock=lambda: t[0]) as cluster:
        import requests as rq

        from ioparallax.exporters.stargate.target import probe
        from tests.exporters.stargate.support import RequestsClient

        session = rq.Session()
        # Read cvm-1's main page before the move, let the vdisk move, then discover: cvm-2 lists it too.
        real_get = session.get

        def get(url, **kw):
            r = real_get(url, **kw)
            t[0] = FROZEN - FROZEN % 60 + 30.5  # the move happens right after the first page
            return r

        session.get = get
        result = probe(
            RequestsClient(session),
            cluster.urls["cvm-1"],
            time.monotonic() + 5,
            discover=True,
            discovery_ports=sim_ports(cluster),
        )
        listings = [row.vdisk_id for c in result.cvms if c.page for row in c.page.vdisks]
        assert listings == [str(sc.disks[0].vdisk_id)] * 2, "both CVMs must have listed the moving vdisk"
        from ioparallax.exporters.stargate.collector import StargateCollector

        text = StargateCollector(result).render().decode()
        assert len(samples(text, "stargate_vdisk_info")) == 1
        assert len(samples(text, "stargate_vdisk_read_ops_per_second")) == 1


@given(st.text(max_size=400) | st.binary(max_size=400).map(lambda b: b.decode("latin-1")))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_parser_raises_only_its_own_error(text):
    page = text.encode("utf-8", "replace")  # the parser takes bytes, as fetched (lone surrogates: "?")
    for fn in (lambda: parse_main_page(page, "http://x/"), lambda: parse_vdisk_page(page)):
        try:
            fn()
        except StargatePageError:
            pass


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=100_000))
def test_truncated_real_pages_raise_only_its_own_error(cut):
    page = _real_pages()
    for text in page:
        try:
            parse_main_page(text[: cut % len(text)].encode(), "http://x/")
        except StargatePageError:
            pass
        try:
            parse_vdisk_page(text[: cut % len(text)].encode())
        except StargatePageError:
            pass


_PAGES: list[str] = []


def _real_pages() -> list[str]:
    if not _PAGES:
        with StargateCluster("postgres", clock=lambda: FROZEN) as cluster:
            url = cluster.urls["cvm-1"] + "/"
            main = requests.get(url, timeout=5).text
            page = parse_main_page(main.encode(), url)
            _PAGES.append(main)
            _PAGES.extend(requests.get(v.href, timeout=5).text for v in page.vdisks)
    return _PAGES


def test_unknown_labels_are_kept_in_snake_case():
    assert canonical("Zeroes") == "zero"
    assert canonical("Estore  SSD Local") == "estore_ssd_local"
    assert canonical("Cloud Tier (S3)") == "cloud_tier_s3"


def test_target_forms():
    assert target_url("10.0.0.5") == "http://10.0.0.5:2009/"
    assert target_url("10.0.0.5:2010") == "http://10.0.0.5:2010/"
    assert target_url("[fd00::5]:2009") == "http://[fd00::5]:2009/"
    assert target_url("http://cvm/") == "http://cvm:80/"
    assert target_url("https://cvm.example.com:2009/") == "https://cvm.example.com:2009/"


def test_mapping_errors_name_file_and_key(tmp_path):
    f = tmp_path / "map.yaml"
    f.write_text('vdisks:\n  "1000": {vm: a, disc: x}\n')
    with pytest.raises(ConfigError, match=r"map.yaml: vdisks.1000.disc: unknown key"):
        load_mapping(str(f))
    f.write_text('vdisks:\n  "1000": {disk: x}\n')
    with pytest.raises(ConfigError, match=r"vdisks.1000.vm: is required"):
        load_mapping(str(f))


def test_help_explains(capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "/probe?target=" in out and "discover=true" in out and "docs/stargate.md" in out
    assert "prism:" in out and "password_env" in out and "insecure_skip_verify" in out and "stargate_prism_up" in out
    assert "alias: tls_verify: false" in out


@pytest.mark.parametrize("span", ["x", "", "-3", "99999999"])
def test_odd_colspan_gives_the_parsers_own_error_or_a_page(span):
    main = _real_pages()[0].replace('colspan="4">Oplog', f'colspan="{span}">Oplog')
    try:
        page = parse_main_page(main.encode(), "http://x/")
    except StargatePageError as exc:
        assert "no column" in str(exc)  # the header no longer lines up: named, not a crash
    else:
        assert page.vdisks


def test_detail_values_come_from_the_leading_cells():
    page = _real_pages()[1]
    detail = parse_vdisk_page(page.encode())
    # The parser reads only a row's leading value cells (bar-graph cells follow them): one more
    # trailing cell on every row changes nothing.
    extra = page.replace("</td></tr>", "</td><td>999</td></tr>")
    again = parse_vdisk_page(extra.encode())
    assert again.read_latency == detail.read_latency and again.read_sources == detail.read_sources


@functools.cache
def _detail_pages(scenario: str, build: int) -> tuple[bytes, ...]:
    sim = StargateCluster(scenario_with_build(scenario, build), clock=lambda: FROZEN)
    return tuple(sim.render_detail(cvm, d.vdisk_id).encode() for cvm in sim.cvms for d in sim.hosted(cvm))


def _uncut(monkeypatch, page: bytes):
    """parse_vdisk_page of the whole page (the bar-graph cut switched off), or its error."""
    from ioparallax.exporters.stargate import parse

    with monkeypatch.context() as m:
        m.setattr(parse, "_cut_bar_graphs", lambda html: html)
        try:
            return parse_vdisk_page(page)
        except StargatePageError as exc:
            return str(exc)


def _cut(page: bytes):
    try:
        return parse_vdisk_page(page)
    except StargatePageError as exc:
        return str(exc)


@pytest.mark.parametrize("build", [2014, 2015, 2016])
@pytest.mark.parametrize("scenario", ["zero-heavy", "postgres", "cache-hero"])
def test_bar_graph_cut_reads_what_the_whole_page_reads(monkeypatch, scenario, build):
    from ioparallax.exporters.stargate.parse import _cut_bar_graphs

    for page in _detail_pages(scenario, build):
        cut = _cut_bar_graphs(page)
        # The four histograms' bar graphs (8 rows x 20 cells each) are gone, nothing else is.
        assert page.count(b"<td") - cut.count(b"<td") == 4 * 8 * 20
        assert cut.count(b"</tr>") == page.count(b"</tr>")
        assert _cut(page) == _uncut(monkeypatch, page)
        assert _cut(page).read_latency.count > 0 or _cut(page).write_latency.count > 0


_BAR = '<td bgcolor="#3b6fb6" width="6"></td>'


@pytest.mark.parametrize(
    "change, kept",
    [
        (lambda p: p.replace(_BAR, f"\n  {_BAR}\n"), ""),  # whitespace between cells: cut
        (lambda p: p.replace(_BAR, '<td bgcolor="#3b6fb6" width="6"> </td>'), ""),  # blank cells: cut
        (lambda p: p.replace("</td></tr>", "</td>\n</tr>"), ""),
        (lambda p: p.replace(_BAR, '<td bgcolor="#3b6fb6">7</td>'), ">7<"),  # text in a bar cell
        (lambda p: p.replace(_BAR, '<td title="a>b"></td>'), "a>b"),  # ">" in an attribute
        (lambda p: p.replace(_BAR, "< td></td>"), "< td>"),  # "< td>" is text, not a tag
        (lambda p: p.replace(_BAR, "<td><b></b></td>"), "<b>"),  # another tag
        (lambda p: p.replace("</tr>", "</TR>"), "*"),  # another dialect: parsed whole
        (lambda p: p.replace("</tr>", ""), "*"),
    ],
    ids=["newlines", "blank", "newline-before-tr", "text", "gt-attr", "space-tag", "tag", "upper", "no-tr-end"],
)
def test_bar_graph_cut_leaves_rows_it_cannot_prove_empty(monkeypatch, change, kept):
    """Rows whose end is not provably content-less ``<td>`` cells keep all their cells (``kept``:
    markup that must survive the cut; ``*``: no row is cut), and the parse is the same."""
    from ioparallax.exporters.stargate.parse import _cut_bar_graphs

    original = _detail_pages("zero-heavy", 2015)[0].decode()
    page = change(original).encode()
    assert page != original.encode()
    cut = _cut_bar_graphs(page)
    if kept == "*":
        assert cut == page
    elif kept:
        assert cut.count(kept.encode()) == page.count(kept.encode()) > 0
        assert len(cut) < len(page)  # the rows with empty bar graphs only are still cut
    else:
        assert page.count(b"<td") - cut.count(b"<td") == 4 * 8 * 20
    assert _cut(page) == _uncut(monkeypatch, page)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    at=st.integers(min_value=0, max_value=10**6),
    text=st.text(alphabet='<>/td "=x\n', min_size=1, max_size=12),
    times=st.integers(min_value=1, max_value=3),
)
# Two "/" made a latency row's first cells "<td>5 ms ...</td></td></td>": lxml ignores the stray
# end tags, and the cut took the cells the parse reads (7 buckets, expected 8).
@example(at=849, text="/", times=2)
# A tag opened in a cell's text with a quote ('1<t/<="6 kB'): the quote swallowed everything up to
# the next '"' (in a cut bar-graph cell), so the cut changed what it swallowed (3 buckets of 8).
@example(at=4891, text='<t/<="', times=1)
# The same quote opened in an earlier row's end tag ('</th/<=">'): it reaches into the cut rows.
@example(at=10076, text='/<="', times=1)
def test_bar_graph_cut_never_changes_a_parse(monkeypatch, at, text, times):
    """Markup spliced anywhere into a real detail view (mostly into its bar graphs): the page
    parses to the same records, or the same error, with the cut and without."""
    page = _detail_pages("zero-heavy", 2016)[0]
    for i in range(times):
        pos = (at * (i + 7)) % len(page)
        page = page[:pos] + text.encode() + page[pos:]
    assert _cut(page) == _uncut(monkeypatch, page)


def test_exposition_escapes_labels_and_keeps_bucket_bounds_exact(zero_heavy):
    from ioparallax.exporters.stargate.client import HttpClient
    from ioparallax.exporters.stargate.collector import StargateCollector
    from ioparallax.exporters.stargate.target import probe

    result = probe(HttpClient(), zero_heavy.urls["cvm-1"], time.monotonic() + 5, discover=True)
    tricky = 'db "prod"\\new\nline'
    text = StargateCollector(result, {"1000": {"vm": tricky, "disk": "scsi0:1"}}).render().decode()
    info = next(dict(k) for k in samples(text, "stargate_vdisk_info") if ("vdisk_id", "1000") in k)
    assert info["vm"] == tricky and info["disk"] == "scsi0:1"
    # le as client_python (and, for 1 MiB, client_golang) writes it: exact, never "%g"'s 1.04858e+06.
    les = {dict(k)["le"] for k in samples(text, "stargate_vdisk_write_size_bytes_bucket") if ("vdisk_id", "1000") in k}
    assert les == {"4096.0", "8192.0", "16384.0", "32768.0", "65536.0", "524288.0", "1.048576e+06", "+Inf"}
    assert one(text, "stargate_vdisk_write_size_bytes_bucket", vdisk_id="1000", le="+Inf") == one(
        text, "stargate_vdisk_write_size_bytes_gcount", vdisk_id="1000"
    )
    result = promtool_check_metrics(text)
    assert result.returncode == 0, result.stdout + result.stderr


def test_blank_working_set_label_is_not_an_index_error():
    # A page cut right after a Working Set row's first cell used to raise IndexError.
    page = _real_pages()[1]
    cut = page.index("<td>Read WSS (MB)</td>") + len("<tr><td>") - len("<tr>")
    for text in (page[:cut], page.replace("<td>Read WSS (MB)</td>", "<td></td>")):
        try:
            parse_vdisk_page(text.encode())
        except StargatePageError:
            pass


def test_allow_list_matches_patterns_ips_and_cidrs():
    from ioparallax.exporters.stargate.address import TargetPolicy

    p = TargetPolicy(["10.0.0.0/24", "fd00::/64", "cvm-*.example.com", "192.0.2.7"])
    assert p.allows("10.0.0.5") and p.allows("fd00::5") and p.allows("CVM-1.Example.com") and p.allows("192.0.2.7")
    assert not p.allows("10.0.1.5") and not p.allows("fd01::5") and not p.allows("cvm-1.example.com.evil.net")
    assert not p.allows("192.0.2.8") and not p.allows("cvm.example.com")
    assert not TargetPolicy([]).allows("127.0.0.1") and TargetPolicy([], allow_any=True).allows("anything")
    with pytest.raises(ValueError, match="neither a CIDR"):
        TargetPolicy(["10.0.0.0/33"])


def test_limits_and_allow_list_config_errors_name_file_and_key(tmp_path):
    f = tmp_path / "sg.yml"
    f.write_text(
        "targets: [10.0.0.0/24, cvm-*.lab]\nbody_size_limit: 8MiB\nmax_pages_per_probe: 100\ndiscovery_ports: [2010]\n"
    )
    cfg = load_mapping_config(f)
    assert cfg.targets == ["10.0.0.0/24", "cvm-*.lab"] and not cfg.allow_unlisted
    assert cfg.limits.body_size_limit == 8 * 1024 * 1024 and cfg.limits.max_pages == 100
    assert cfg.discovery_ports == (2010,) and cfg.policy().allows("10.0.0.9")
    for text, where in (
        ("targets: [10.0.0.0/33]\n", r"sg.yml: targets\[0\]: .*neither a CIDR"),
        ("targets: [{a: 1}]\n", r"targets\[0\]: expected a host pattern"),
        ("body_size_limit: lots\n", r"body_size_limit: expected a size"),
        ("body_size_limit: 10\n", r"body_size_limit: at least 1KiB"),
        ("max_pages_per_probe: 0\n", r"max_pages_per_probe: expected an integer from 1"),
        ("discovery_ports: [70000]\n", r"discovery_ports\[0\]: expected a port"),
        ("allow_unlisted_targets: yes please\n", r"allow_unlisted_targets: expected a boolean"),
        ("target: [10.0.0.1]\n", r"target: unknown key"),
    ):
        f.write_text(text)
        with pytest.raises(ConfigError, match=where):
            load_mapping_config(f)


def load_mapping_config(path):
    from ioparallax.exporters.stargate.config import load_config

    return load_config(str(path))


@given(st.text(max_size=120))
@settings(max_examples=300, deadline=None)
def test_target_parser_raises_only_its_own_error(text):
    from ioparallax.exporters.stargate.address import TargetError, TargetPolicy, cluster_cvms, parse_target

    try:
        t = parse_target(text)
    except TargetError:
        return
    assert t.url.isascii() and t.url.isprintable() and t.origin.scheme in ("http", "https")
    cluster_cvms(t, [text, "http://" + text, text + "/x"], TargetPolicy.loopback())


def test_exporter_without_an_allow_list_refuses_every_target_and_says_so_at_start(tmp_path, zero_heavy):
    from tests.support import ManagedProcess, free_port, venv_tool, wait_for_http

    port = free_port()
    proc = ManagedProcess(
        "stargate-exporter", [venv_tool("stargate-exporter"), f"--web.listen-address=127.0.0.1:{port}"], tmp_path
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", proc=proc)
        r = requests.get(f"http://127.0.0.1:{port}/probe", params={"target": zero_heavy.urls["cvm-1"]}, timeout=10)
        assert r.status_code == 400 and "allow-list" in r.text
    finally:
        proc.stop()
    log_text = proc.log_path.read_text()
    assert "no targets allowed: every probe is refused" in log_text and "refused: host 127.0.0.1" in log_text
    # The flag (or STARGATE_TARGETS) lists them.
    port = free_port()
    proc = ManagedProcess(
        "stargate-exporter-2",
        [venv_tool("stargate-exporter"), f"--web.listen-address=127.0.0.1:{port}", "--stargate.target=10.9.9.0/24"],
        tmp_path,
        env={"STARGATE_TARGETS": "127.0.0.1, cvm-*.lab"},
    )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", proc=proc)
        r = requests.get(f"http://127.0.0.1:{port}/probe", params={"target": zero_heavy.urls["cvm-1"]}, timeout=10)
        assert r.status_code == 200 and one(r.text, "stargate_up") == 1
    finally:
        proc.stop()
    assert "targets allowed: 127.0.0.1, cvm-*.lab, 10.9.9.0/24" in proc.log_path.read_text()


@settings(max_examples=1000, deadline=None)
@given(
    base=st.sampled_from(
        [
            "http://127.0.0.1:2009",
            "HTTP://127.0.0.1:2009",
            "http://127.0.0.1:2010",
            "https://127.0.0.1:2009",
            "http://127.0.0.1",
        ]
    ),
    path=st.text(alphabet="ab09_.~/?=&+,;:-%#@ \\\"'[]!$()*\n", max_size=14),
)
def test_same_origin_link_fast_path_answers_as_the_full_check(base, path):
    """Links the main page joins (origin + plain path) skip urlsplit; every link gets the answer
    the full check gives: the path, or TargetError."""
    from ioparallax.exporters.stargate.address import TargetError, _split, parse_target, same_origin_link

    origin = parse_target("127.0.0.1:2009").origin
    url = base + "/" + path
    try:
        link_origin, full = _split(url)
        expected = full if link_origin == origin else None
    except TargetError:
        expected = None
    try:
        got = same_origin_link(origin, url)
    except TargetError:
        got = None
    assert got == expected
