"""The HTTP side shared by all ioparallax exporters.

Routes, as the blackbox and snmp exporters have them:

- ``/``            a landing page: what this exporter is, its probe URL, its config
- ``/metrics``     the exporter's own process metrics (never a target's data)
- ``/probe``       ``?target=...``: one fresh registry per request, collected while Prometheus waits
- ``/-/healthy``   200 OK while the process serves

A probe is given a deadline derived from Prometheus' ``X-Prometheus-Scrape-Timeout-Seconds``
header (less a safety margin) so that it answers with ``<source>_up 0`` before Prometheus gives up,
instead of letting the scrape fail with no explanation.
"""

from __future__ import annotations

import html
import logging
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable
from urllib.parse import parse_qs, urlparse

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

#: Seconds kept free between our deadline and Prometheus' scrape timeout.
TIMEOUT_MARGIN_SECONDS = 0.5


class BadRequest(Exception):
    """A probe request that cannot be served (unknown target, bad parameter): HTTP 400."""


@dataclass
class Probe:
    """What a /probe request asks for."""

    target: str
    params: dict[str, str]
    deadline: float  # time.monotonic() value by which the answer must be written

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


#: Builds the collectors of one probe. Must not raise for target failures: those are reported
#: as `<source>_up 0` by the collector itself. May raise BadRequest for a malformed request.
#: May instead return the exposition already written (bytes, text format 0.0.4), for exporters
#: whose probes are too big for prometheus_client's per-sample objects.
ProbeHandler = Callable[[Probe], "Iterable[Collector] | bytes"]

#: Content type of an exposition a probe handler wrote itself.
CONTENT_TYPE_TEXT_004 = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class ExporterApp:
    name: str                      # e.g. "stargate-exporter"
    description: str               # one paragraph for the landing page
    probe: ProbeHandler | None     # None: the exporter has no /probe (single-target)
    default_timeout: float = 10.0  # used when Prometheus sends no timeout header
    collectors: list[Collector] = field(default_factory=list)  # served on /metrics beside process metrics
    example_target: str = ""
    extra_links: list[tuple[str, str]] = field(default_factory=list)
    config_text: str = ""          # shown on the landing page (never with secrets)

    def landing_page(self) -> bytes:
        links = [("metrics", "/metrics: the exporter's own metrics")]
        if self.probe is not None:
            example = f"/probe?target={self.example_target}" if self.example_target else "/probe?target=..."
            links.append((example, f"{example}: probe one target"))
        links.extend(self.extra_links)
        items = "\n".join(f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in links)
        cfg = f"<h2>Configuration</h2><pre>{html.escape(self.config_text)}</pre>" if self.config_text else ""
        return (
            f"<!DOCTYPE html><html><head><title>{html.escape(self.name)}</title></head><body>"
            f"<h1>{html.escape(self.name)}</h1><p>{html.escape(self.description)}</p>"
            f"<ul>{items}</ul>{cfg}</body></html>"
        ).encode()


def _scrape_timeout(headers, default: float) -> float:
    raw = headers.get("X-Prometheus-Scrape-Timeout-Seconds")
    if raw:
        try:
            value = float(raw)
            if value > 0:
                return max(0.1, value - TIMEOUT_MARGIN_SECONDS)
        except ValueError:
            pass
    return default


def make_handler(app: ExporterApp, own_registry: CollectorRegistry = REGISTRY):
    extra = CollectorRegistry(auto_describe=False)
    for c in app.collectors:
        extra.register(c)

    class Handler(BaseHTTPRequestHandler):
        server_version = app.name
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # route access logs to logging at debug level
            log.debug("http %s %s", self.address_string(), fmt % args)

        def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            url = urlparse(self.path)
            try:
                if url.path == "/":
                    self._send(200, app.landing_page(), "text/html; charset=utf-8")
                elif url.path == "/metrics":
                    body = generate_latest(own_registry) + generate_latest(extra)
                    self._send(200, body, CONTENT_TYPE_LATEST)
                elif url.path == "/-/healthy":
                    self._send(200, b"OK\n")
                elif url.path == "/probe" and app.probe is not None:
                    self._probe(url.query)
                else:
                    self._send(404, b"not found\n")
            except BrokenPipeError:
                log.debug("client went away before the answer was written")
            except Exception:  # never let one request kill the server thread silently
                log.exception("unexpected error serving %s", self.path)
                try:
                    self._send(500, b"internal error, see the exporter's log\n")
                except OSError:
                    pass

        def _probe(self, query: str) -> None:
            qs = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
            target = qs.pop("target", "").strip()
            if not target:
                self._send(400, b"the 'target' parameter is missing\n")
                return
            timeout = _scrape_timeout(self.headers, app.default_timeout)
            probe = Probe(target=target, params=qs, deadline=time.monotonic() + timeout)
            try:
                result = app.probe(probe)
                if isinstance(result, bytes):
                    self._send(200, result, CONTENT_TYPE_TEXT_004)
                    return
                collectors = list(result)
            except BadRequest as exc:
                self._send(400, f"{exc}\n".encode())
                return
            registry = CollectorRegistry(auto_describe=False)
            for c in collectors:
                registry.register(c)
            self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)

    return Handler


class ExporterServer:
    """A threaded HTTP server for an ExporterApp; ``port=0`` picks a free port (tests)."""

    def __init__(self, app: ExporterApp, host: str, port: int):
        self.app = app
        self.httpd = ThreadingHTTPServer((host, port), make_handler(app))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def start(self) -> "ExporterServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=self.app.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def parse_listen_address(value: str) -> tuple[str, int]:
    """``:9761``, ``127.0.0.1:9761`` or ``[::1]:9761`` -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected [host]:port, got {value!r}")
    host = host.strip("[]")
    return host or "0.0.0.0", int(port)
