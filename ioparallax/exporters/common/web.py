"""The HTTP side shared by all ioparallax exporters.

Routes, as the blackbox and snmp exporters have them:

- ``/``            a landing page: what this exporter is, its probe URL, its config
- ``/metrics``     the exporter's own process metrics and ``<name>_build_info`` (never a target's data)
- ``/probe``       ``?target=...``: the target's exposition, written fresh per request while Prometheus waits
- ``/-/healthy``   200 OK while the process serves

A probe is given a deadline derived from Prometheus' ``X-Prometheus-Scrape-Timeout-Seconds``
header less ``--web.timeout-offset`` (as blackbox_exporter does) so that it answers with
``<source>_up 0`` before Prometheus gives up, instead of letting the scrape fail with no
explanation. A header that is not a positive finite number is ignored; one above
:data:`MAX_SCRAPE_TIMEOUT_SECONDS` is clamped to it.

``--web.config.file`` (ioparallax.exporters.common.webconfig) adds TLS and basic auth; as in the
exporter-toolkit, basic auth then guards every route, ``/-/healthy`` included.
:func:`serve` is the one start-up path of the three CLIs.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import errno
import gzip
import html
import io
import ipaddress
import logging
import math
import select
import signal
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder
from prometheus_client.registry import Collector

from ioparallax.exporters.common.config import ConfigError, parse_duration
from ioparallax.exporters.common.webconfig import BasicAuth, WebConfig, load_web_config
from ioparallax.version import BuildInfoCollector, version_line

log = logging.getLogger(__name__)

#: Default of --web.timeout-offset: seconds kept free between our deadline and Prometheus'
#: scrape timeout (blackbox_exporter's default too).
DEFAULT_TIMEOUT_OFFSET = 0.5

#: A scrape-timeout header above this is taken as this. Prometheus' own scrape timeouts are
#: seconds to a minute or two; a larger value (or ``inf``, ``1e300``) would let one probe hold a
#: thread and its target's connections for hours.
MAX_SCRAPE_TIMEOUT_SECONDS = 120.0

#: Connections waiting to be accepted (socketserver's default is 5: with 40 scrapes arriving at
#: once, 11-25 waited a second or more before their probe's clock even started).
LISTEN_BACKLOG = 128

#: Seconds a client has to complete the TLS handshake, in all (done in the connection's own
#: thread, so a slow or silent client never holds up the accept loop).
TLS_HANDSHAKE_TIMEOUT = 10.0

#: Default of --web.read-header-timeout: seconds a client has to send a request's line and headers,
#: in all (Go's http.Server ReadHeaderTimeout), from the connection's start (after the TLS
#: handshake) or, on a kept-alive connection, from the request's first byte. Prometheus sends its
#: ~300 bytes of headers at once; a client sending a byte a second is cut off here.
DEFAULT_READ_HEADER_TIMEOUT = 10.0

#: Default of --web.idle-timeout: seconds a kept-alive connection may wait for its next request
#: (Go's IdleTimeout). Above the usual 15 s-1 m scrape intervals, so that Prometheus keeps one
#: connection per target from scrape to scrape.
DEFAULT_IDLE_TIMEOUT = 120.0

#: Default of --web.max-connections: connections served at once (each holds a thread), as
#: Prometheus' own --web.max-connections. Past it a new connection is closed at once (a plain HTTP
#: one after a one-line 503 answer) and a warning is logged; a scrape then fails and is retried at
#: the next interval. One Prometheus holds one connection per target scraped at the same time.
DEFAULT_MAX_CONNECTIONS = 256

#: Seconds to write one answer (Python's socket timeout bounds a whole sendall()) before the
#: connection is dropped: a client that stopped reading. A 7 MB probe answer, uncompressed, needs
#: ~120 KB/s for it; Prometheus asks for gzip, which shrinks it many times.
SEND_STALL_TIMEOUT = 60.0

#: gzip level of compressed answers: the fastest. A 1,000-vdisk probe is ~7 MB of very repetitive
#: text, which level 1 already shrinks many times, and the time is spent inside the scrape timeout.
GZIP_LEVEL = 1


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


#: Writes the exposition of one probe (bytes, text format 0.0.4): every exporter writes its own,
#: as its probes are too big for prometheus_client's per-sample objects. Must not raise for target
#: failures: those are reported as `<source>_up 0` in the exposition. May raise BadRequest for a
#: malformed request.
ProbeHandler = Callable[[Probe], bytes]

#: Content type of an exposition a probe handler wrote itself.
CONTENT_TYPE_TEXT_004 = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class ServerLimits:
    """What a client may hold of the server: see the DEFAULT_* constants and docs/endpoint-security.md."""

    read_header_timeout: float = DEFAULT_READ_HEADER_TIMEOUT
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    tls_handshake_timeout: float = TLS_HANDSHAKE_TIMEOUT

    def check(self) -> None:
        """StartupError (exit 2) naming the flag of a value that is not usable."""
        for flag, value in (
            ("--web.read-header-timeout", self.read_header_timeout),
            ("--web.idle-timeout", self.idle_timeout),
        ):
            if not (math.isfinite(value) and value > 0):
                raise StartupError(f"{flag}: expected a duration above 0, got {value:g}", 2)
        if not 1 <= self.max_connections <= 65536:
            raise StartupError(f"--web.max-connections: expected 1 to 65536, got {self.max_connections}", 2)


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


@dataclass
class ExporterApp:
    name: str  # e.g. "stargate-exporter"
    description: str  # one paragraph for the landing page
    probe: ProbeHandler | None  # None: the exporter has no /probe (single-target)
    default_timeout: float = 10.0  # used when Prometheus sends no timeout header
    collectors: list[Collector] = field(default_factory=list)  # served on /metrics beside process metrics
    example_target: str = ""
    extra_links: list[tuple[str, str]] = field(default_factory=list)
    config_text: str = ""  # shown on the landing page (never with secrets)
    timeout_offset: float = DEFAULT_TIMEOUT_OFFSET  # --web.timeout-offset

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

    def probe_timeout(self, header: str | None) -> float:
        """Seconds a probe may take: the scrape-timeout header (ignored unless a positive finite
        number, at most MAX_SCRAPE_TIMEOUT_SECONDS) less the offset, or ``default_timeout``."""
        value = None
        if header:
            try:
                value = float(header)
            except ValueError:
                value = None
            if value is not None and not (math.isfinite(value) and value > 0):
                value = None
            if value is None:
                log.debug("ignoring scrape timeout header %r: not a positive number of seconds", header[:40])
        if value is None:
            return self.default_timeout
        return max(0.1, min(value, MAX_SCRAPE_TIMEOUT_SECONDS) - self.timeout_offset)


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
    extra = _one_registry(BuildInfoCollector(app.name), *app.collectors)  # <name>_build_info first
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


@dataclass(frozen=True)
class ListenAddress:
    """Where to bind: ``host`` as given ('' = every interface), the socket family and address."""

    text: str
    family: socket.AddressFamily
    sockaddr: tuple
    dual_stack: bool = False  # an IPv6 socket that also takes IPv4 connections

    @property
    def all_interfaces(self) -> bool:
        return self.sockaddr[0] in ("", "::", "0.0.0.0")


def resolve_listen_address(host: str, port: int) -> ListenAddress:
    """The socket family and address for a host from :func:`parse_listen_address`: '' is every
    interface (one dual-stack IPv6 socket where the kernel allows it, else IPv4 0.0.0.0), an IPv6
    literal an AF_INET6 socket, a name its first address. OSError when a name does not resolve."""
    text = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if not host:
        if socket.has_ipv6 and socket.has_dualstack_ipv6():
            return ListenAddress(f":{port}", socket.AF_INET6, ("::", port, 0, 0), dual_stack=True)
        return ListenAddress(f":{port}", socket.AF_INET, ("0.0.0.0", port))
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        ip = None
    if ip is not None and ip.version == 4:
        return ListenAddress(text, socket.AF_INET, (host, port))
    if ip is not None and ip.is_unspecified and socket.has_dualstack_ipv6():
        return ListenAddress(text, socket.AF_INET6, ("::", port, 0, 0), dual_stack=True)
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    return ListenAddress(text, family, sockaddr)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self, listen: ListenAddress, handler, tls: ssl.SSLContext | None, limits: ServerLimits = ServerLimits()
    ):
        self.address_family = listen.family
        self.listen = listen
        self.tls = tls
        self.limits = limits
        self._active = 0  # connections being served (each in its thread)
        self._active_lock = threading.Lock()
        self._refused = 0  # connections refused since the last warning
        self._refused_logged = -math.inf  # time.monotonic() of the last warning
        super().__init__(listen.sockaddr, handler)

    @property
    def active_connections(self) -> int:
        return self._active

    def verify_request(self, request, client_address) -> bool:
        """Past max_connections a new connection is closed at once (socketserver closes it when
        this says False): a plain HTTP one gets a 503 line first, sent without waiting."""
        with self._active_lock:
            if self._active < self.limits.max_connections:
                self._active += 1
                return True
            self._refused += 1
            refused, now = self._refused, time.monotonic()
            warn = now - self._refused_logged >= 60.0
            if warn:
                self._refused, self._refused_logged = 0, now
        if self.tls is None:
            try:
                request.send(_TOO_MANY, socket.MSG_DONTWAIT)
            except OSError:
                pass
        if warn:
            log.warning(
                "refused %d connections in the last minute (from %s and others): %d connections open, "
                "the most --web.max-connections allows",
                refused,
                client_address[0],
                self.limits.max_connections,
            )
        return False

    def process_request(self, request, client_address) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: the slot taken in verify_request is free again
            self._release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._active_lock:
            self._active -= 1

    def server_bind(self) -> None:
        if self.listen.family == socket.AF_INET6:
            # Dual stack for the bare ":port"; an explicit IPv6 address stays IPv6 only.
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if self.listen.dual_stack else 1)
        # TCPServer's bind without HTTPServer's getfqdn(), a reverse DNS lookup at start-up.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    def finish_request(self, request, client_address) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        # In the connection's own thread: the accept loop never waits for a handshake. One
        # deadline over the whole handshake (a per-read timeout let a client sending a byte a
        # second hold the thread for minutes).
        deadline = time.monotonic() + self.limits.tls_handshake_timeout
        request.settimeout(self.limits.tls_handshake_timeout)
        try:
            first = request.recv(1, socket.MSG_PEEK)
            if not first:
                return
            if first != b"\x16":  # not a TLS handshake record: most likely plain HTTP
                request.sendall(
                    b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
                    b"Connection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
                )
                return
            conn = self.tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
            _handshake(conn, deadline)
        except (OSError, ssl.SSLError) as exc:
            log.debug("TLS handshake with %s failed: %s", client_address[0], exc)
            return
        try:
            # The handler's reads have their own deadlines (header, idle); sends SEND_STALL_TIMEOUT.
            conn.settimeout(SEND_STALL_TIMEOUT)
            super().finish_request(conn, client_address)
        finally:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


_TOO_MANY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 21\r\n"
    b"Connection: close\r\n\r\ntoo many connections\n"
)


def _handshake(conn: ssl.SSLSocket, deadline: float) -> None:
    """The server side of a TLS handshake, finished by ``deadline`` or TimeoutError."""
    conn.setblocking(False)
    while True:
        try:
            conn.do_handshake()
            return
        except ssl.SSLWantReadError:
            want_read = True
        except ssl.SSLWantWriteError:
            want_read = False
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("TLS handshake not finished in time")
        ready = select.select([conn] if want_read else [], [] if want_read else [conn], [], remaining)
        if not any(ready):
            raise TimeoutError("TLS handshake not finished in time")


class ExporterServer:
    """A threaded HTTP(S) server for an ExporterApp; ``port=0`` picks a free port (tests)."""

    def __init__(
        self,
        app: ExporterApp,
        host: str,
        port: int,
        web: WebConfig | None = None,
        limits: ServerLimits = ServerLimits(),
    ):
        self.app = app
        self.web = web or WebConfig()
        self.limits = limits
        self.listen = resolve_listen_address(host, port)
        tls = self.web.tls.context() if self.web.tls else None
        self.httpd = _Server(self.listen, make_handler(app, web=self.web), tls, limits)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        scheme = "https" if self.web.tls else "http"
        return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"

    def describe(self) -> str:
        host, port = self.address
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if self.listen.all_interfaces:
            where += " (every interface" + (", IPv4 and IPv6)" if self.listen.dual_stack else ")")
        return f"{where}, {self.web.describe()}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def start(self) -> ExporterServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name=self.app.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def parse_listen_address(value: str) -> tuple[str, int]:
    """``:9761`` (every interface: host ''), ``127.0.0.1:9761``, ``[::1]:9761`` or
    ``name:9761`` -> (host, port)."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit() or not port.isascii() or int(port) > 65535:
        raise ValueError(f"expected [host]:port with a port 0-65535, got {value!r}")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError(f"expected [ipv6]:port, got {value!r}")
        host = host[1:-1]
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            raise ValueError(f"{host!r} in {value!r} is not an IPv6 address") from None
    elif ":" in host:
        raise ValueError(f"an IPv6 address needs brackets, as in [::1]:9761; got {value!r}")
    return host, int(port)


# ---- start-up: the flags and the one path the three CLIs share ----


class StartupError(Exception):
    """The exporter cannot start serving: one line for the log, and the exit code."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class WebSettings:
    listen: str
    config_file: str | None = None
    timeout_offset: float = DEFAULT_TIMEOUT_OFFSET
    limits: ServerLimits = ServerLimits()


def listen_help(default_listen: str) -> str:
    port = default_listen.rpartition(":")[2]
    return (
        f"address to serve on (default: {default_listen}, i.e. every interface, IPv4 and IPv6: anyone who "
        f"can reach this host can scrape it; restrict it with --web.listen-address=127.0.0.1:{port} and "
        "protect it with --web.config.file)"
    )


def add_web_args(parser: argparse.ArgumentParser, default_listen: str, probe: bool = True) -> None:
    """--web.listen-address (left None when not given, so a config file can set it),
    --web.config.file and, for exporters with /probe, --web.timeout-offset."""
    parser.add_argument(
        "--web.listen-address", dest="listen", default=None, metavar="[HOST]:PORT", help=listen_help(default_listen)
    )
    parser.add_argument(
        "--web.config.file",
        dest="web_config_file",
        default=None,
        metavar="FILE",
        help="exporter-toolkit web config (YAML): tls_server_config (cert_file, key_file, "
        "client_auth_type, client_ca_file, min_version) for HTTPS and basic_auth_users "
        "(user: bcrypt hash) for basic auth on every route; read at start-up",
    )
    parser.add_argument(
        "--web.read-header-timeout",
        dest="read_header_timeout",
        type=_duration_arg,
        default=DEFAULT_READ_HEADER_TIMEOUT,
        metavar="DURATION",
        help="time a client has to send a request's line and headers, in all; a slower client is "
        f"disconnected (default: {DEFAULT_READ_HEADER_TIMEOUT:g}s)",
    )
    parser.add_argument(
        "--web.idle-timeout",
        dest="idle_timeout",
        type=_duration_arg,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="DURATION",
        help="time a kept-alive connection may wait for its next request before it is closed "
        f"(default: {DEFAULT_IDLE_TIMEOUT:g}s)",
    )
    parser.add_argument(
        "--web.max-connections",
        dest="max_connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="connections served at once; past it a new connection is closed at once (plain HTTP: "
        "after a 503 answer) and a warning logged (default: %(default)s)",
    )
    if probe:
        parser.add_argument(
            "--web.timeout-offset",
            dest="timeout_offset",
            type=float,
            default=DEFAULT_TIMEOUT_OFFSET,
            metavar="SECONDS",
            help="a probe ends this long before Prometheus' scrape timeout (from the "
            "X-Prometheus-Scrape-Timeout-Seconds header, taken as at most "
            f"{MAX_SCRAPE_TIMEOUT_SECONDS:g} s) (default: %(default)s)",
        )


def _duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def server_limits(args: argparse.Namespace) -> ServerLimits:
    """ServerLimits from add_web_args' flags (defaults for those a parser does not have)."""
    return ServerLimits(
        read_header_timeout=getattr(args, "read_header_timeout", DEFAULT_READ_HEADER_TIMEOUT),
        idle_timeout=getattr(args, "idle_timeout", DEFAULT_IDLE_TIMEOUT),
        max_connections=getattr(args, "max_connections", DEFAULT_MAX_CONNECTIONS),
    )


def web_settings(args: argparse.Namespace, listen: str) -> WebSettings:
    """WebSettings from add_web_args' flags; ``listen`` is used when --web.listen-address is not given."""
    return WebSettings(
        listen=getattr(args, "listen", None) or listen,
        config_file=getattr(args, "web_config_file", None),
        timeout_offset=getattr(args, "timeout_offset", DEFAULT_TIMEOUT_OFFSET),
        limits=server_limits(args),
    )


_BIND_ERRORS: dict[int | None, str] = {
    errno.EADDRINUSE: "the port is already in use (another process listens on it)",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def start_server(app: ExporterApp, settings: WebSettings) -> ExporterServer:
    """Check the settings, read the web config and bind; StartupError (exit 2 for a configuration
    mistake, 1 when the address cannot be listened on) with one line saying why."""
    if not (math.isfinite(settings.timeout_offset) and settings.timeout_offset >= 0):
        raise StartupError(f"--web.timeout-offset: expected seconds >= 0, got {settings.timeout_offset}", 2)
    if not (math.isfinite(app.default_timeout) and app.default_timeout > 0):
        raise StartupError(f"--probe.default-timeout: expected seconds > 0, got {app.default_timeout}", 2)
    settings.limits.check()
    try:
        host, port = parse_listen_address(settings.listen)
    except ValueError as exc:
        raise StartupError(f"--web.listen-address: {exc}", 2) from None
    try:
        web = load_web_config(settings.config_file)
    except ConfigError as exc:
        raise StartupError(f"--web.config.file: {exc}", 2) from None
    app.timeout_offset = settings.timeout_offset
    try:
        return ExporterServer(app, host, port, web, settings.limits)
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on {settings.listen}: cannot resolve {host!r}: {exc.strerror}") from None
    except (OSError, ssl.SSLError) as exc:
        cause = _BIND_ERRORS.get(exc.errno) or getattr(exc, "strerror", None) or str(exc)
        raise StartupError(f"cannot listen on {settings.listen}: {cause}") from None


def serve(app: ExporterApp, settings: WebSettings) -> int:
    """Start the server, serve until SIGTERM or Ctrl-C, stop; the process' exit code.
    Start-up failures are one error line in the log (no traceback)."""
    try:
        server = start_server(app, settings)
    except StartupError as exc:
        log.error("cannot start: %s", exc)
        return exc.exit_code
    log.info("listening on %s; %s", server.describe(), version_line(app.name))
    if server.web.basic_auth_users and server.web.tls is None:
        log.warning("basic auth without tls_server_config: passwords cross the network in clear text")
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
