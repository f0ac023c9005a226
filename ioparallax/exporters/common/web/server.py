"""The threading HTTP(S) server: where it listens (IPv4, IPv6, dual stack), the TLS handshake in
each connection's own thread under one deadline, the connection cap, and ServerLimits."""

from __future__ import annotations

import ipaddress
import logging
import math
import select
import socket
import socketserver
import ssl
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer

from ioparallax.exporters.common.web.app import ExporterApp, StartupError
from ioparallax.exporters.common.web.handler import SEND_STALL_TIMEOUT, make_handler
from ioparallax.exporters.common.webconfig import WebConfig

log = logging.getLogger(__name__)

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
