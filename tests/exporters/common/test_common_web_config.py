"""Shared exporter plumbing: the HTTP routes and the config helpers."""

import re
import socket

import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from ioparallax.exporters.common.web.app import MAX_SCRAPE_TIMEOUT_SECONDS, BadRequest, ExporterApp
from ioparallax.exporters.common.web.server import ExporterServer, parse_listen_address, resolve_listen_address
from ioparallax.units import parse_bytes, parse_duration
from ioparallax.yamlconf import ConfigError, Section, load_yaml


class Echo:
    def __init__(self, probe):
        self.probe = probe

    def collect(self):
        g = GaugeMetricFamily("echo_remaining_seconds", "Seconds left before the probe deadline.")
        g.add_metric([], round(self.probe.remaining(), 1))
        yield g
        yield GaugeMetricFamily("echo_up", "1 when the target answered.", value=1 if self.probe.target == "good" else 0)


def handler(probe):
    if probe.target == "bad-request":
        raise BadRequest("unknown module 'x'")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Echo(probe))
    return generate_latest(registry)  # a probe handler writes its exposition (text 0.0.4)


@pytest.fixture
def server():
    srv = ExporterServer(
        ExporterApp("echo-exporter", "Echoes probes.", handler, default_timeout=7, example_target="good"),
        "127.0.0.1",
        0,
    ).start()
    yield srv
    srv.stop()


def test_landing_page_links_metrics_and_probe(server):
    r = requests.get(server.url + "/", timeout=5)
    assert r.status_code == 200
    assert "echo-exporter" in r.text and "/probe?target=good" in r.text and "/metrics" in r.text


def _remaining(text: str) -> float:
    return float(re.search(r"^echo_remaining_seconds (\S+)$", text, re.M).group(1))


def test_probe_uses_prometheus_timeout_header_less_offset(server):
    # The probe's remaining time is read after the request reached it: at most the header less
    # the 0.5 s offset, and less only by the time the request took (generous for a loaded machine).
    r = requests.get(
        server.url + "/probe",
        params={"target": "good"},
        headers={"X-Prometheus-Scrape-Timeout-Seconds": "3"},
        timeout=5,
    )
    assert r.status_code == 200
    assert 1.5 <= _remaining(r.text) <= 2.5
    assert "echo_up 1.0" in r.text
    r = requests.get(server.url + "/probe", params={"target": "other"}, timeout=5)
    assert 6.0 <= _remaining(r.text) <= 7.0
    assert "echo_up 0.0" in r.text


@pytest.mark.parametrize(
    "header, expected",
    [
        ("3", 2.5),
        ("0.3", 0.1),
        ("1e300", MAX_SCRAPE_TIMEOUT_SECONDS - 0.5),
        ("inf", 7.0),
        ("-inf", 7.0),
        ("nan", 7.0),
        ("-1", 7.0),
        ("0", 7.0),
        ("abc", 7.0),
        ("", 7.0),
        (None, 7.0),
        ("1e400", 7.0),
    ],
)
def test_probe_timeout_ignores_and_clamps_odd_headers(header, expected):
    app = ExporterApp("echo-exporter", "", handler, default_timeout=7)
    assert app.probe_timeout(header) == pytest.approx(expected)
    app.timeout_offset = 2.0
    if header == "3":
        assert app.probe_timeout(header) == pytest.approx(1.0)


def test_probe_errors_are_http_400(server):
    r = requests.get(server.url + "/probe", timeout=5)
    assert r.status_code == 400 and "target" in r.text
    r = requests.get(server.url + "/probe", params={"target": "bad-request"}, timeout=5)
    assert r.status_code == 400 and "unknown module 'x'" in r.text


def test_metrics_has_process_metrics_not_probe_data(server):
    r = requests.get(server.url + "/metrics", timeout=5)
    assert r.status_code == 200
    assert "python_info" in r.text and "echo_up" not in r.text
    assert requests.get(server.url + "/nope", timeout=5).status_code == 404


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4k", 4096),
        ("4KiB", 4096),
        ("1 MiB", 1024**2),
        ("20GB", 20 * 1024**3),
        (512, 512),
        ("1.5m", int(1.5 * 1024**2)),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["4q", "k", "-1k", True, "lots"])
def test_parse_bytes_rejects(bad):
    with pytest.raises(ValueError):
        parse_bytes(bad)


@pytest.mark.parametrize(
    "text, expected", [("500ms", 0.5), ("20s", 20), ("5m", 300), ("1h", 3600), (3, 3.0), ("250us", 0.00025)]
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == pytest.approx(expected)


def test_section_reports_file_and_key(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("targets:\n  - host: a\n    port: yes\n")
    root = Section(load_yaml(f), f)
    target = root.sections("targets")[0]
    with pytest.raises(ConfigError) as err:
        target.get("port", int)
    assert str(err.value) == f"{f}: targets[0].port: expected an integer, got a boolean"
    target.get("host", str)
    target.data["hots"] = 1
    with pytest.raises(ConfigError, match=r"targets\[0\].hots: unknown key"):
        target.reject_unknown()


def test_load_yaml_missing_file_names_it(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: cannot read file"):
        load_yaml(tmp_path / "nope.yaml")


def test_parse_listen_address():
    assert parse_listen_address(":9761") == ("", 9761)
    assert parse_listen_address("127.0.0.1:1") == ("127.0.0.1", 1)
    assert parse_listen_address("[::1]:80") == ("::1", 80)
    assert parse_listen_address("localhost:9761") == ("localhost", 9761)
    for bad in ("localhost", "::1:80", "[::1:80", "[nope]:80", "a:99999", "a:", "a:-1", "a:٣"):
        with pytest.raises(ValueError):
            parse_listen_address(bad)


def test_listen_address_family():
    every = resolve_listen_address("", 9761)
    if socket.has_dualstack_ipv6():
        assert (every.family, every.sockaddr[0], every.dual_stack) == (socket.AF_INET6, "::", True)
    else:
        assert (every.family, every.sockaddr) == (socket.AF_INET, ("0.0.0.0", 9761))
    assert every.all_interfaces
    assert resolve_listen_address("127.0.0.1", 1).family == socket.AF_INET
    v6 = resolve_listen_address("::1", 1)
    assert (v6.family, v6.dual_stack, v6.all_interfaces) == (socket.AF_INET6, False, False)


def test_server_on_ipv6_loopback():
    try:
        srv = ExporterServer(ExporterApp("echo-exporter", "Echoes probes.", handler), "::1", 0).start()
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback: {exc}")
    try:
        assert srv.url.startswith("http://[::1]:")
        r = requests.get(srv.url + "/probe", params={"target": "good"}, timeout=5)
        assert r.status_code == 200 and "echo_up 1.0" in r.text
    finally:
        srv.stop()
