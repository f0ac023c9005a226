"""The request handler: the routes (``/``, ``/metrics``, ``/probe``, ``/-/healthy``), basic auth
on every route, gzip, and reads under one deadline (request headers, keep-alive idle)."""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import logging
import socket
import ssl
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder

from ioparallax.exporters.common.labels import TruncationCollector
from ioparallax.exporters.common.web.app import CONTENT_TYPE_TEXT_004, BadRequest, ExporterApp, Probe, ProbeHandler
from ioparallax.exporters.common.webconfig import BasicAuth, WebConfig
from ioparallax.version import BuildInfoCollector

if TYPE_CHECKING:
    from ioparallax.exporters.common.web.server import _Server

log = logging.getLogger(__name__)

#: Seconds to write one answer (Python's socket timeout bounds a whole sendall()) before the
#: connection is dropped: a client that stopped reading. A 7 MB probe answer, uncompressed, needs
#: ~120 KB/s for it; Prometheus asks for gzip, which shrinks it many times.
SEND_STALL_TIMEOUT = 60.0

#: gzip level of compressed answers: the fastest. A 1,000-vdisk probe is ~7 MB of very repetitive
#: text, which level 1 already shrinks many times, and the time is spent inside the scrape timeout.
GZIP_LEVEL = 1


class _DeadlineReader(io.RawIOBase):
    """The request side of a connection with one deadline over many reads: each read waits at
    most until ``deadline`` (time.monotonic()), so a client sending a byte a second cannot stretch
    a header read past it the way it could a per-read socket timeout."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("deadline passed")
            self.sock.settimeout(remaining)
        return self.sock.recv_into(buffer)


def _accepts_gzip(header: str | None) -> bool:
    """True when an Accept-Encoding header allows gzip (``gzip``, ``*``; not with ``q=0``)."""
    for item in (header or "").split(","):
        coding, _, params = item.partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        q = 1.0
        for p in params.split(";"):
            k, _, v = p.partition("=")
            if k.strip().lower() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        if q > 0:
            return True
    return False


class _Registries:
    """One collector yielding the metrics of several registries, so that one exposition (one
    OpenMetrics ``# EOF``) holds them all."""

    def __init__(self, *registries: CollectorRegistry):
        self.registries = registries

    def collect(self):
        for r in self.registries:
            yield from r.collect()


def _one_registry(*collectors) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    return registry


def exposition(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The registry in the format the Accept header prefers (OpenMetrics or text 0.0.4, as
    client_python negotiates); if the OpenMetrics writer refuses a metric, text 0.0.4."""
    encoder, ctype = choose_encoder(accept or "")
    if ctype != CONTENT_TYPE_LATEST:
        try:
            return encoder(registry), ctype
        except Exception as exc:  # noqa: BLE001 - any writer failure: answer in the plain format
            log.warning("OpenMetrics exposition failed (%s); answering in text format 0.0.4", exc)
    return generate_latest(registry), CONTENT_TYPE_LATEST


def make_handler(app: ExporterApp, own_registry: CollectorRegistry = REGISTRY, web: WebConfig | None = None):
    # <name>_build_info first, then <name>_label_values_truncated_total (common/labels.py)
    extra = _one_registry(BuildInfoCollector(app.name), TruncationCollector(app.name), *app.collectors)
    metrics_registry = _one_registry(_Registries(own_registry, extra))
    web = web or WebConfig()
    auth = BasicAuth(web.basic_auth_users) if web.basic_auth_users else None
    headers = web.headers
    realm = app.name.replace('"', "")

    class Handler(BaseHTTPRequestHandler):
        server_version = app.name
        protocol_version = "HTTP/1.1"
        server: _Server

        def setup(self) -> None:
            super().setup()
            # Reads through one deadline (see _DeadlineReader) instead of socket.makefile's reader.
            self.rfile.close()
            self._reader = _DeadlineReader(self.connection)
            self._buffered = io.BufferedReader(self._reader, 65536)
            self.rfile = self._buffered
            self._requests = 0

        def handle_one_request(self) -> None:
            limits = self.server.limits
            if self._requests:
                # A kept-alive connection: wait at most idle_timeout for the next request to start.
                self._reader.deadline = time.monotonic() + limits.idle_timeout
                try:
                    started = bool(self._buffered.peek(1))
                except OSError:  # TimeoutError included: the connection was idle too long
                    started = False
                if not started:
                    self.close_connection = True
                    return
            self._requests += 1
            self._reader.deadline = time.monotonic() + limits.read_header_timeout
            super().handle_one_request()  # a TimeoutError while reading ends the connection

        def parse_request(self) -> bool:
            ok = super().parse_request()  # reads the headers (under the header deadline)
            self._reader.deadline = None
            self.connection.settimeout(SEND_STALL_TIMEOUT)
            return ok

        def log_message(self, fmt, *args):  # route access logs to logging at debug level
            log.debug("http %s %s", self.address_string(), fmt % args)

        def end_headers(self) -> None:
            for name, value in headers.items():
                self.send_header(name, value)
            super().end_headers()

        def _send(
            self,
            code: int,
            body: bytes,
            ctype: str = "text/plain; charset=utf-8",
            compressible: bool = False,
            extra_headers: Iterable[tuple[str, str]] = (),
        ) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            if compressible:
                self.send_header("Vary", "Accept-Encoding")
                if _accepts_gzip(self.headers.get("Accept-Encoding")):
                    body = gzip.compress(body, compresslevel=GZIP_LEVEL)
                    self.send_header("Content-Encoding", "gzip")
            for name, value in extra_headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _authorized(self) -> bool:
            if auth is None:
                return True
            header = self.headers.get("Authorization", "")
            scheme, _, encoded = header.partition(" ")
            if scheme.lower() == "basic":
                try:
                    decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8", "surrogateescape")
                except (binascii.Error, ValueError):
                    decoded = ""
                user, sep, password = decoded.partition(":")
                if sep and auth.check(user, password):
                    return True
                log.debug("basic auth failed for user=%s from %s", user, self.address_string())
            self._send(
                401, b"Unauthorized\n", extra_headers=[("WWW-Authenticate", f'Basic realm="{realm}", charset="UTF-8"')]
            )
            return False

        def do_HEAD(self):
            self._serve(head=True)

        def do_GET(self):
            self._serve(head=False)

        def _serve(self, head: bool) -> None:
            try:
                if not self._authorized():
                    return
                try:
                    url = urlsplit(self.path)
                except ValueError:  # e.g. an unclosed "[" in an absolute URL
                    self._send(400, b"bad request: malformed URL\n")
                    return
                if url.path == "/":
                    self._send(200, app.landing_page(), "text/html; charset=utf-8")
                elif url.path == "/metrics":
                    body, ctype = exposition(metrics_registry, self.headers.get("Accept"))
                    self._send(200, body, ctype, compressible=True)
                elif url.path == "/-/healthy":
                    self._send(200, b"OK\n")
                elif url.path == "/probe" and app.probe is not None:
                    self._probe(app.probe, url.query, head)
                else:
                    self._send(404, b"not found\n")
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                log.debug("client went away before the answer was written")
            except Exception:  # never let one request kill the server thread silently
                log.exception("unexpected error serving %s", self.path)
                try:
                    self._send(500, b"internal error, see the exporter's log\n")
                except OSError:
                    pass

        def _probe(self, handler: ProbeHandler, query: str, head: bool) -> None:
            try:
                parsed = parse_qs(query, keep_blank_values=True, max_num_fields=100)
            except ValueError:
                self._send(400, b"bad request: more than 100 query parameters\n")
                return
            qs = {k: v[-1] for k, v in parsed.items()}
            target = qs.pop("target", "").strip()
            if not target:
                self._send(400, b"the 'target' parameter is missing\n")
                return
            if head:
                # HEAD asks whether the route answers, not for a probe of the target: no probe runs.
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_TEXT_004)
                self.send_header("Vary", "Accept-Encoding")
                self.end_headers()
                return
            timeout = app.probe_timeout(self.headers.get("X-Prometheus-Scrape-Timeout-Seconds"))
            probe = Probe(target=target, params=qs, deadline=time.monotonic() + timeout)
            try:
                body = handler(probe)
            except BadRequest as exc:
                self._send(400, f"{exc}\n".encode())
                return
            self._send(200, body, CONTENT_TYPE_TEXT_004, compressible=True)

    return Handler
