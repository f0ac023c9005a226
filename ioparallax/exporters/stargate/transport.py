"""HTTP GETs of Stargate pages within one probe's deadline and limits (the transport layer).

One :class:`Budget` per probe holds its deadline, its limits and its connections. Every wait is
bounded by the time left to the deadline: connecting, sending, each read of headers and body
(the socket timeout is set to the remaining time before every read, and the body is read in
chunks, so a server trickling a byte a second ends at the deadline, not a read timeout later).
When the probe gives up at its deadline it calls :meth:`Budget.abort`, which shuts the probe's
sockets down: fetches still running in abandoned threads fail at once instead of running on.
A body larger than ``body_size_limit`` fails as soon as the limit is passed, never buffered.
"""

from __future__ import annotations

import http.client
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from .targets import Origin

#: A 1,000-vdisk main page of the simulator is ~430 kB (bench/stargate_scrape.py prints it);
#: 2 MiB is ~5x that (room for ~4,500 hosted vdisks, or longer rows than the simulator's), and
#: bounds what one page can cost: blackbox_exporter's ``body_size_limit`` idea.
DEFAULT_BODY_SIZE_LIMIT = 2 * 1024 * 1024
#: Pages one probe may fetch: a CVM with 1,000 vdisks is 1,001 pages; ``discover=true`` over a
#: 4-CVM cluster hosting 1,000 vdisks each is 4,004.
DEFAULT_MAX_PAGES = 5000
_CHUNK = 64 * 1024
_DIGITS = re.compile(r"[0-9]{1,18}", re.ASCII)


class FetchError(Exception):
    """A page that could not be fetched; the message names the URL and the cause."""


class DeadlineExceeded(FetchError):
    pass


@dataclass(frozen=True)
class Limits:
    body_size_limit: int = DEFAULT_BODY_SIZE_LIMIT
    max_pages: int = DEFAULT_MAX_PAGES


class Budget:
    """One probe's deadline (``time.monotonic()``), limits and open connections, shared by the
    threads fetching its pages."""

    def __init__(self, deadline: float, limits: Limits = Limits()):
        self.deadline = deadline
        self.limits = limits
        self.pages = 0
        self.aborted = False
        self._lock = threading.Lock()
        self._conns: dict[tuple[int, Origin], http.client.HTTPConnection] = {}

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def take_page(self, url: str) -> None:
        with self._lock:
            if self.pages >= self.limits.max_pages:
                raise FetchError(
                    f"{url}: not fetched, the probe reached max_pages_per_probe ({self.limits.max_pages} pages)"
                )
            self.pages += 1

    def connection(self, origin: Origin) -> http.client.HTTPConnection:
        """This thread's keep-alive connection to ``origin`` (created unconnected)."""
        key = (threading.get_ident(), origin)
        with self._lock:
            if self.aborted:
                raise DeadlineExceeded(f"{origin.url}: deadline exceeded")
            conn = self._conns.get(key)
            if conn is None:
                cls = http.client.HTTPSConnection if origin.scheme == "https" else http.client.HTTPConnection
                conn = self._conns[key] = cls(origin.host, origin.port, timeout=max(0.001, self.remaining()))
            return conn

    def drop(self, origin: Origin) -> None:
        with self._lock:
            conn = self._conns.pop((threading.get_ident(), origin), None)
        if conn is not None:
            conn.close()

    def abort(self) -> None:
        """Give up: every socket of the probe is shut down, so threads still blocked in a
        connection's read return at once (the threads close their own connections)."""
        with self._lock:
            self.aborted = True
            conns = list(self._conns.values())
        for conn in conns:
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """The probe is over and no fetch is running: close every connection."""
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()


def _content_length(resp: http.client.HTTPResponse, url: str) -> int | None:
    if resp.chunked:
        return None
    values = resp.headers.get_all("Content-Length") or []
    if not values:
        return None
    parts = {p.strip() for v in values for p in v.split(",")}
    if len(parts) != 1 or not _DIGITS.fullmatch(next(iter(parts))):
        shown = ", ".join(values)[:80]
        raise FetchError(f"{url}: bad Content-Length header {shown!r}")
    return int(next(iter(parts)))


class PageClient(Protocol):
    """What a probe fetches its pages with: :class:`HttpClient` (tests also pass a client over
    requests, tests/stargate/support.py)."""

    def get(self, origin: Origin, path: str, budget: Budget) -> bytes: ...


class HttpClient:
    """Keep-alive HTTP/1.1 GETs with http.client, one connection per thread and CVM.

    http.client directly: for a thousand small pages per probe, requests' per-call machinery
    costs more CPU than parsing them."""

    def get(self, origin: Origin, path: str, budget: Budget) -> bytes:
        url = f"{origin.scheme}://{origin.netloc}{path}"
        budget.take_page(url)
        for attempt in (1, 2):
            left = budget.remaining()
            if left <= 0:
                raise DeadlineExceeded(f"{url}: deadline exceeded before the request")
            conn = budget.connection(origin)
            try:
                if conn.sock is None:
                    conn.timeout = left
                    conn.connect()
                    if budget.aborted:  # aborted while connecting: not registered in time
                        raise DeadlineExceeded(f"{url}: deadline exceeded while connecting")
                conn.sock.settimeout(max(0.001, budget.remaining()))
                conn.request("GET", path, headers={"Accept": "text/html"})
                resp = conn.getresponse()
                return self._body(resp, conn, url, budget)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # A kept-alive connection the server closed: retry once on a new one.
                budget.drop(origin)
                if budget.aborted:
                    raise DeadlineExceeded(f"{url}: deadline exceeded") from None
                if attempt == 2:
                    raise FetchError(f"{url}: connection closed by the server ({exc.__class__.__name__})") from None
            except FetchError:
                budget.drop(origin)
                raise
            except ConnectionRefusedError:
                budget.drop(origin)
                raise FetchError(f"{url}: connection refused") from None
            except TimeoutError:
                budget.drop(origin)
                raise DeadlineExceeded(f"{url}: deadline exceeded (no answer in time)") from None
            except (OSError, http.client.HTTPException, ValueError) as exc:
                budget.drop(origin)
                if budget.aborted:
                    raise DeadlineExceeded(f"{url}: deadline exceeded") from None
                raise FetchError(f"{url}: {exc.__class__.__name__}: {str(exc)[:200]}") from None
        raise AssertionError("unreachable")

    @staticmethod
    def _body(resp: http.client.HTTPResponse, conn: http.client.HTTPConnection, url: str, budget: Budget) -> bytes:
        limit = budget.limits.body_size_limit
        if resp.status != 200:
            raise FetchError(f"{url}: HTTP {resp.status}")
        length = _content_length(resp, url)
        if length is not None and length > limit:
            raise FetchError(f"{url}: page of {length} bytes (Content-Length) is over body_size_limit ({limit} bytes)")
        body = bytearray()
        while True:
            left = budget.remaining()
            if left <= 0:
                raise DeadlineExceeded(f"{url}: deadline exceeded while reading the page ({len(body)} bytes read)")
            if conn.sock is not None:
                conn.sock.settimeout(left)
            chunk = resp.read1(min(_CHUNK, limit + 1 - len(body)))
            if not chunk:
                break
            body += chunk
            if len(body) > limit:
                raise FetchError(f"{url}: page is over body_size_limit ({limit} bytes); not read further")
        if length is not None and len(body) < length:
            raise FetchError(f"{url}: response cut off ({len(body)} of {length} bytes)")
        if not resp.isclosed():
            resp.read()  # nothing left to read: marks the response done, so the connection is reused
        return bytes(body)
