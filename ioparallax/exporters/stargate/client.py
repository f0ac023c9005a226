"""HTTP GETs of Stargate pages within one probe's deadline and limits (the transport layer).

One :class:`Budget` per probe holds its deadline, its limits and its keep-alive connections.
:class:`HttpClient` fetches a probe's pages from the probe's own thread: non-blocking sockets and
one ``selectors`` loop, up to ``concurrency`` requests in flight, each over a keep-alive HTTP/1.1
connection. Every wait is the loop's ``select`` bounded by the time left to the deadline, so a
server that never answers, or trickles a byte a second, ends the fetch at the deadline, not a
read timeout later, and no thread is left behind. A host name is resolved once per probe by
``getent ahosts`` in a child process (:func:`resolve`), killed and reaped at the deadline: a
resolver that hangs costs the probe its deadline and leaves nothing running (a thread blocked in
``getaddrinfo`` could not be stopped). A body larger than ``body_size_limit`` fails as
soon as the limit is passed (or at once when its Content-Length says so), never buffered.

Why not http.client in a thread per request (what this was): 16 probes at once as Prometheus
scrapes 16 CVMs meant 128 fetch threads handing one interpreter lock around (~80 futex calls a
page) and http.client's per-response header parsing; the exporter's own process (fetches and
exposition) went from ~5.8 to ~2 s of CPU for 4,000 pages (docs/stargate.md, Cluster scale;
``bench/stargate_cluster.py`` prints it as "own process").

Why not a library that runs many requests from one thread: the best one measured, libcurl's
multi interface through pycurl, cost 9-16 % more CPU in the exporter's own process on the
16-CVM cluster bench, with the same wall time (aiohttp, urllib3 and httpx cost far more a page);
``bench/stargate_transport.py`` runs both side by side and fails when this one loses
(docs/stargate.md, Transport).

The response parser is HTTP/1.1's framing only, and strict where a hostile server could make
it ambiguous: a status line ``HTTP/1.x NNN``, at most 100 header lines and 64 KiB of head,
Content-Length (all copies equal) or chunked transfer coding (read to the connection's end when
neither is given), 1xx interim answers skipped, 200 the only status read further. A kept-alive
connection the server closed before answering is retried once on a new one (GET is
idempotent); a connection is reused only after a response that ended exactly where its framing
said.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import selectors
import socket
import ssl
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from ioparallax.exporters.stargate.address import Origin

#: A 1,000-vdisk main page of the simulator is ~430 kB (bench/stargate_scrape.py prints it);
#: 2 MiB is ~5x that (room for ~4,500 hosted vdisks, or longer rows than the simulator's), and
#: bounds what one page can cost: blackbox_exporter's ``body_size_limit`` idea.
DEFAULT_BODY_SIZE_LIMIT = 2 * 1024 * 1024
#: Pages one probe may fetch: a CVM with 1,000 vdisks is 1,001 pages; ``discover=true`` over a
#: 4-CVM cluster hosting 1,000 vdisks each is 4,004.
DEFAULT_MAX_PAGES = 5000
#: Requests of one probe in flight at once (one connection each, per CVM), unless told.
DEFAULT_CONCURRENCY = 8
_RECV = 256 * 1024
_MAX_HEAD = 64 * 1024
_MAX_HEADERS = 100
_MAX_CHUNK_LINE = 4096
_STATUS = re.compile(rb"HTTP/1\.([01]) ([0-9]{3})(?:[ \t][^\r\n]*)?", re.ASCII)
_DIGITS = re.compile(r"[0-9]{1,18}", re.ASCII)
_HEX = re.compile(rb"[0-9a-fA-F]{1,15}", re.ASCII)


class FetchError(Exception):
    """A page that could not be fetched; the message names the URL and the cause."""


class DeadlineExceeded(FetchError):
    """The probe's deadline passed; ``pending``: the requests of the call not answered."""

    def __init__(self, message: str, pending: int = 1):
        super().__init__(message)
        self.pending = pending


@dataclass(frozen=True)
class Limits:
    body_size_limit: int = DEFAULT_BODY_SIZE_LIMIT
    max_pages: int = DEFAULT_MAX_PAGES


class _Conn:
    """One connection: its socket, and whether it has answered a request before (a reused
    connection the server closed meanwhile is retried once)."""

    __slots__ = ("origin", "sock", "served")

    def __init__(self, origin: Origin, sock: socket.socket):
        self.origin, self.sock, self.served = origin, sock, 0

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Budget:
    """One probe's deadline (``time.monotonic()``), limits and keep-alive connections. Used by
    the probe's own thread only (the fetches run there), so it needs no lock."""

    def __init__(self, deadline: float, limits: Limits = Limits()):
        self.deadline = deadline
        self.limits = limits
        self.pages = 0
        self._idle: dict[Origin, list[_Conn]] = {}
        self._open: set[_Conn] = set()
        self.resolved: dict[str, list[tuple]] = {}  # host name -> its addresses, for this probe

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def left(self, pending: int, total: int) -> float:
        """The seconds left, or DeadlineExceeded naming the ``pending`` requests of ``total``."""
        left = self.remaining()
        if left <= 0:
            raise DeadlineExceeded(f"deadline exceeded, {pending} of {total} pending", pending)
        return left

    def take_page(self, url: str) -> None:
        if self.pages >= self.limits.max_pages:
            raise FetchError(
                f"{url}: not fetched, the probe reached max_pages_per_probe ({self.limits.max_pages} pages)"
            )
        self.pages += 1

    def checkout(self, origin: Origin) -> _Conn | None:
        """An idle keep-alive connection to ``origin``, or None."""
        idle = self._idle.get(origin)
        return idle.pop() if idle else None

    def opened(self, conn: _Conn) -> None:
        self._open.add(conn)

    def checkin(self, conn: _Conn) -> None:
        self._idle.setdefault(conn.origin, []).append(conn)

    def discard(self, conn: _Conn) -> None:
        self._open.discard(conn)
        conn.close()

    def close(self) -> None:
        """The probe is over: close every connection."""
        conns, self._open, self._idle = list(self._open), set(), {}
        for conn in conns:
            conn.close()


class PageClient(Protocol):
    """What a probe fetches its pages with: :class:`HttpClient` (tests also pass a client over
    requests, tests/exporters/stargate/support.py)."""

    def get_many(
        self, wanted: Sequence[tuple[Origin, str]], budget: Budget, concurrency: int = DEFAULT_CONCURRENCY
    ) -> Iterator[tuple[int, bytes | FetchError]]:
        """Each page of ``wanted`` (origin, path) as it arrives: (its index, its body or the
        FetchError that cost it). Raises DeadlineExceeded (``pending``: pages not answered) when
        the budget's deadline passes first."""
        ...


class _Retry(Exception):
    """A reused connection was closed by the server before any byte of the answer."""


class _Exchange:
    """One GET on one connection: connect (new connections), TLS handshake (https), send the
    request, read the head, read the body. ``step`` advances it on a socket event."""

    __slots__ = (
        "index",
        "conn",
        "url",
        "request",
        "limit",
        "state",
        "buf",
        "got",
        "length",
        "chunked",
        "keep_alive",
        "body",
        "pos",
        "chunk_left",
        "addrs",
        "handshake",
        "fd",
    )

    def __init__(self, index: int, url: str, request: bytes, limit: int):
        self.index, self.url, self.request, self.limit = index, url, request, limit
        self.conn: _Conn | None = None
        self.state = "send"
        self.buf = bytearray()
        self.got = 0  # bytes of the answer received
        self.length: int | None = None
        self.chunked = False
        self.keep_alive = True
        self.body = bytearray()
        self.pos = 0
        self.chunk_left = -1  # chunked: bytes left in the current chunk (-1: a size line next)
        self.addrs: list[tuple] = []
        self.handshake = False
        self.fd = -1  # the socket's descriptor while it is in the selector

    # ------------------------------------------------------------------------------- events
    def events(self) -> int:
        return selectors.EVENT_WRITE if self.state in ("connect", "handshake-write", "send") else selectors.EVENT_READ

    def fail(self, cause: str) -> FetchError:
        return FetchError(f"{self.url}: {cause}")

    def step(self) -> bytes | None:
        """Advance on a ready socket: the body when the answer is complete, else None."""
        if self.state == "connect":
            self._connected()
            if self.state == "connect":
                return None
        if self.state.startswith("handshake"):
            if not self._handshake():
                return None
        if self.state == "send":
            self._send()
            return None
        return self._receive()

    def _connected(self) -> None:
        assert self.conn is not None
        err = self.conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err == 0:
            self.state = "handshake-write" if self.handshake else "send"
            return
        if err == errno.ECONNREFUSED:
            raise self.fail("connection refused")
        raise self.fail(f"connection failed: {errno.errorcode.get(err, str(err))} ({os.strerror(err)})")

    def _handshake(self) -> bool:
        assert self.conn is not None
        sock = self.conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self.state = "handshake-read"
            return False
        except ssl.SSLWantWriteError:
            self.state = "handshake-write"
            return False
        except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
            raise self.fail(f"TLS error: {_reason(exc)}") from None
        self.state = "send"
        return True

    def _send(self) -> None:
        assert self.conn is not None
        try:
            sent = self.conn.sock.send(self.request)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            return
        except (BrokenPipeError, ConnectionResetError):
            if self.conn.served:
                raise _Retry() from None
            raise self.fail("connection closed by the server while sending the request") from None
        self.request = self.request[sent:]
        if not self.request:
            self.state = "head"

    def _receive(self) -> bytes | None:
        assert self.conn is not None
        sock = self.conn.sock
        while True:
            try:
                data = sock.recv(_RECV)
            except (BlockingIOError, ssl.SSLWantReadError):
                return None
            except ssl.SSLWantWriteError:
                return None
            except ConnectionResetError:
                data = b""
            if not data:
                return self._eof()
            self.got += len(data)
            self.buf += data
            done = self._parse()
            if done is not None:
                return done
            if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                return None

    def _eof(self) -> bytes | None:
        if self.got == 0 and self.conn is not None and self.conn.served:
            raise _Retry()
        self.keep_alive = False
        if self.state == "head":
            if self.got == 0:
                raise self.fail("connection closed by the server before answering")
            raise self.fail("response cut off in its headers")
        if self.length is not None:
            raise self.fail(f"response cut off ({len(self.buf)} of {self.length} bytes)")
        if self.chunked:
            raise self.fail(f"response cut off (chunked body incomplete, {len(self.body)} bytes read)")
        return bytes(self.buf)  # no framing: the body ends with the connection

    # ------------------------------------------------------------------------------ parsing
    def _parse(self) -> bytes | None:
        while self.state == "head":
            if not self._head():
                return None
        if self.length is not None:
            if len(self.buf) < self.length:
                return None
            if len(self.buf) > self.length:
                self.keep_alive = False  # more than was announced: never reuse this connection
            return bytes(self.buf[: self.length])
        if self.chunked:
            return self._chunks()
        if len(self.buf) > self.limit:
            raise self._over()
        return None

    def _head(self) -> bool:
        """Read one head from the buffer: True when one was read (an interim one, or the
        answer's: then the state is "body"), False when more bytes are needed."""
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        lf = buf.find(b"\n\n")
        if lf >= 0 and (end < 0 or lf < end):
            end, sep = lf, 2
        else:
            sep = 4
        if end < 0:
            if len(buf) > _MAX_HEAD:
                raise self.fail(f"response headers over {_MAX_HEAD} bytes")
            return False
        if end > _MAX_HEAD:
            raise self.fail(f"response headers over {_MAX_HEAD} bytes")
        lines = bytes(buf[:end]).split(b"\n")
        del buf[: end + sep]
        status_line = lines[0].rstrip(b"\r")
        m = _STATUS.fullmatch(status_line)
        if not m:
            raise self.fail(f"BadStatusLine: {status_line[:80]!r}")
        if len(lines) - 1 > _MAX_HEADERS:
            raise self.fail(f"got more than {_MAX_HEADERS} headers")
        minor, status = m.group(1), int(m.group(2))
        if 100 <= status < 200 and status != 101:
            return True  # an interim answer: the real one follows
        if status != 200:
            self.keep_alive = False
            raise self.fail(f"HTTP {status}")
        lengths: list[str] = []
        coding = b""
        connection = b""
        for raw in lines[1:]:
            line = raw.rstrip(b"\r")
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise self.fail(f"bad header line {line[:80]!r}")
            key = name.lower()
            if key == b"content-length":
                lengths.append(value.strip().decode("latin-1"))
            elif key == b"transfer-encoding":
                coding = value.strip().lower()
            elif key == b"connection":
                connection = value.strip().lower()
        self.keep_alive = b"close" not in connection and (minor == b"1" or b"keep-alive" in connection)
        if coding:
            if coding.rsplit(b",", 1)[-1].strip() != b"chunked":
                raise self.fail(f"unsupported Transfer-Encoding {coding[:40]!r}")
            self.chunked = True
        elif lengths:
            parts = {p.strip() for v in lengths for p in v.split(",")}
            if len(parts) != 1 or not _DIGITS.fullmatch(next(iter(parts))):
                raise self.fail(f"bad Content-Length header {', '.join(lengths)[:80]!r}")
            self.length = int(next(iter(parts)))
            if self.length > self.limit:
                raise self.fail(
                    f"page of {self.length} bytes (Content-Length) is over body_size_limit ({self.limit} bytes)"
                )
        else:
            self.keep_alive = False  # the body ends with the connection
        self.state = "body"
        return True

    def _chunks(self) -> bytes | None:
        buf = self.buf
        while True:
            if self.chunk_left < 0:  # a size line (or, after the last chunk, the trailer)
                nl = buf.find(b"\n", self.pos)
                if nl < 0:
                    if len(buf) - self.pos > _MAX_CHUNK_LINE:
                        raise self.fail("bad chunked encoding (chunk size line too long)")
                    break
                line = bytes(buf[self.pos : nl]).rstrip(b"\r")
                self.pos = nl + 1
                if self.chunk_left == -2:  # trailer lines until an empty one
                    if not line:
                        if self.pos < len(buf):
                            self.keep_alive = False
                        return bytes(self.body)
                    continue
                size = line.split(b";", 1)[0].strip()
                if not _HEX.fullmatch(size):
                    raise self.fail(f"bad chunked encoding (chunk size {size[:20]!r})")
                n = int(size, 16)
                if n == 0:
                    self.chunk_left = -2
                    continue
                if len(self.body) + n > self.limit:
                    raise self._over()
                self.chunk_left = n
            else:
                have = len(buf) - self.pos
                if have < self.chunk_left + 2:
                    break
                end = self.pos + self.chunk_left
                self.body += buf[self.pos : end]
                if buf[end : end + 2] != b"\r\n" and buf[end : end + 1] != b"\n":
                    raise self.fail("bad chunked encoding (no line end after a chunk)")
                self.pos = end + (2 if buf[end : end + 1] == b"\r" else 1)
                self.chunk_left = -1
        if self.pos > _RECV:  # keep the buffer short
            del buf[: self.pos]
            self.pos = 0
        return None

    def _over(self) -> FetchError:
        self.keep_alive = False
        return self.fail(f"page is over body_size_limit ({self.limit} bytes); not read further")


def _reason(exc: BaseException) -> str:
    return getattr(exc, "reason", None) or exc.__class__.__name__


#: The command that resolves a host name, in a child process: glibc's ``getent ahosts`` answers
#: what ``getaddrinfo`` would (/etc/hosts, DNS, whatever nsswitch.conf lists). A child process,
#: not a thread, because a resolver that hangs cannot be interrupted in a thread: the child is
#: killed at the probe's deadline and reaped, so nothing of the probe is left running.
RESOLVER: tuple[str, ...] = ("getent", "ahosts")
_RESOLVED_LINE = re.compile(r"([0-9A-Fa-f.:]+)\s+STREAM\b", re.ASCII)


def resolve(origin: Origin, budget: Budget) -> list[tuple]:
    """The origin's socket addresses, (family, sockaddr) each: an IP address as is; a name
    resolved once per probe (the budget keeps it) by :data:`RESOLVER` in a child process that
    is killed when the probe's deadline passes (DeadlineExceeded; FetchError naming the cause
    when the name does not resolve)."""
    try:
        ip = ipaddress.ip_address(origin.host)
    except ValueError:
        pass
    else:
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        return [(family, (origin.host, origin.port))]
    known = budget.resolved.get(origin.host)
    if known is None:
        known = budget.resolved[origin.host] = _resolve_name(origin, budget)
    return [(fam, (addr[0], origin.port, *addr[2:])) for fam, addr in known]


def _resolve_name(origin: Origin, budget: Budget) -> list[tuple]:
    host = origin.host
    if not host.isascii() or not host.isprintable() or host.startswith("-") or not host:
        raise FetchError(f"{origin.url}: cannot resolve {host!r}: not a host name")
    left = budget.remaining()
    if left <= 0:
        raise DeadlineExceeded(f"{origin.url}: deadline exceeded before resolving {host!r}")
    try:
        child = subprocess.Popen(
            [*RESOLVER, host],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
    except OSError as exc:
        raise FetchError(f"{origin.url}: cannot resolve {host!r}: {RESOLVER[0]}: {exc.strerror}") from None
    try:
        out, _ = child.communicate(timeout=max(0.001, left))
    except subprocess.TimeoutExpired:
        raise DeadlineExceeded(f"{origin.url}: deadline exceeded resolving {host!r}") from None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    found: list[tuple] = []
    for line in out.decode("ascii", "replace").splitlines():
        m = _RESOLVED_LINE.match(line)
        if not m:
            continue
        try:
            ip = ipaddress.ip_address(m.group(1))
        except ValueError:
            continue
        addr: tuple = (str(ip), origin.port) if ip.version == 4 else (str(ip), origin.port, 0, 0)
        entry = (socket.AF_INET6 if ip.version == 6 else socket.AF_INET, addr)
        if entry not in found:
            found.append(entry)
    if not found:
        cause = "unknown name" if child.returncode == 2 else f"{RESOLVER[0]} exited {child.returncode}, no address"
        raise FetchError(f"{origin.url}: cannot resolve {host!r}: {cause}")
    return found


_TLS: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """Certificates verified as http.client's default did (the system's CAs)."""
    global _TLS
    if _TLS is None:
        _TLS = ssl.create_default_context()
    return _TLS


class HttpClient:
    """Keep-alive HTTP/1.1 GETs on non-blocking sockets, all of one call in one ``select`` loop
    in the caller's thread (see the module docstring)."""

    #: Called with a request's index (in ``wanted``) as it is started; capture.py times each
    #: page with it. None (the exporter's): nothing is called.
    on_request: Callable[[int], None] | None = None

    def get_many(
        self, wanted: Sequence[tuple[Origin, str]], budget: Budget, concurrency: int = DEFAULT_CONCURRENCY
    ) -> Iterator[tuple[int, bytes | FetchError]]:
        queue = deque(enumerate(wanted))
        total = len(queue)
        active: dict[int, _Exchange] = {}  # socket fd -> exchange
        retried: set[int] = set()
        sel = selectors.DefaultSelector()
        limit = budget.limits.body_size_limit
        try:
            while queue or active:
                while queue and len(active) < max(1, concurrency):
                    i, (origin, path) = queue.popleft()
                    url = origin.page_url(path)
                    ex = None
                    try:
                        if self.on_request is not None:
                            self.on_request(i)
                        budget.take_page(url)
                        ex = self._start(i, origin, path, url, limit, budget)
                        if ex.state == "send":  # a kept-alive connection: send now, wait to read
                            try:
                                ex.step()
                            except _Retry:
                                retried.add(i)
                                assert ex.conn is not None
                                budget.discard(ex.conn)
                                ex = self._start(i, origin, path, url, limit, budget, fresh=True)
                    except DeadlineExceeded as exc:
                        raise DeadlineExceeded(str(exc), len(queue) + len(active) + 1) from None
                    except FetchError as exc:
                        if ex is not None and ex.conn is not None:
                            budget.discard(ex.conn)
                        yield i, exc
                        continue
                    except OSError as exc:
                        if ex is not None and ex.conn is not None:
                            budget.discard(ex.conn)
                        yield i, FetchError(f"{url}: {exc.__class__.__name__}: {str(exc)[:200]}")
                        continue
                    self._watch(sel, active, ex)
                if not active:
                    break
                for key, _ in sel.select(budget.left(len(active) + len(queue), total)):
                    ex = key.data
                    conn = ex.conn
                    assert conn is not None
                    try:
                        body = ex.step()
                    except _Retry:
                        self._unwatch(sel, active, ex, budget, keep=False)
                        if ex.index in retried:
                            yield ex.index, ex.fail("connection closed by the server (twice)")
                            continue
                        retried.add(ex.index)
                        origin, path = wanted[ex.index]
                        try:
                            ex = self._start(ex.index, origin, path, ex.url, limit, budget, fresh=True)
                        except FetchError as exc:
                            yield ex.index, exc
                            continue
                        self._watch(sel, active, ex)
                        continue
                    except FetchError as exc:
                        connecting = ex.state == "connect"
                        self._unwatch(sel, active, ex, budget, keep=False)
                        if connecting and ex.addrs:  # the name's next address
                            try:
                                self._connect(ex, wanted[ex.index][0], budget)
                            except FetchError as again:
                                yield ex.index, again
                                continue
                            self._watch(sel, active, ex)
                            continue
                        yield ex.index, exc
                        continue
                    except OSError as exc:
                        self._unwatch(sel, active, ex, budget, keep=False)
                        yield ex.index, ex.fail(f"{exc.__class__.__name__}: {str(exc)[:200]}")
                        continue
                    if body is None:
                        if key.events != ex.events():
                            sel.modify(ex.fd, ex.events(), ex)
                        continue
                    conn.served += 1
                    self._unwatch(sel, active, ex, budget, keep=ex.keep_alive)
                    yield ex.index, body
        finally:
            for ex in active.values():
                if ex.conn is not None:
                    budget.discard(ex.conn)
            sel.close()

    @staticmethod
    def _watch(sel: selectors.BaseSelector, active: dict[int, _Exchange], ex: _Exchange) -> None:
        assert ex.conn is not None
        ex.fd = ex.conn.sock.fileno()
        active[ex.fd] = ex
        sel.register(ex.fd, ex.events(), ex)

    @staticmethod
    def _unwatch(
        sel: selectors.BaseSelector, active: dict[int, _Exchange], ex: _Exchange, budget: Budget, keep: bool
    ) -> None:
        assert ex.conn is not None
        sel.unregister(ex.fd)  # by the number it was registered with, even if the socket closed since
        del active[ex.fd]
        if keep:
            budget.checkin(ex.conn)
        else:
            budget.discard(ex.conn)

    @staticmethod
    def _start(
        i: int, origin: Origin, path: str, url: str, limit: int, budget: Budget, fresh: bool = False
    ) -> _Exchange:
        if not (path.startswith("/") and path.isascii() and path.isprintable() and " " not in path):
            raise FetchError(f"{url}: not a request path")
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {origin.netloc}\r\nAccept: text/html\r\nAccept-Encoding: identity\r\n\r\n"
        ).encode("ascii")
        ex = _Exchange(i, url, request, limit)
        conn = None if fresh else budget.checkout(origin)
        if conn is not None:
            ex.conn = conn
            return ex
        if budget.remaining() <= 0:
            raise DeadlineExceeded(f"{url}: deadline exceeded before the request")
        ex.addrs = list(resolve(origin, budget))
        HttpClient._connect(ex, origin, budget)
        return ex

    @staticmethod
    def _connect(ex: _Exchange, origin: Origin, budget: Budget) -> None:
        """Start connecting to the exchange's next address (its others stay in ``ex.addrs``,
        tried in turn when this one fails, as socket.create_connection does)."""
        last: FetchError | None = None
        while ex.addrs:
            family, addr = ex.addrs.pop(0)
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            err = sock.connect_ex(addr)
            if err not in (0, errno.EINPROGRESS):
                sock.close()
                last = ex.fail(
                    "connection refused"
                    if err == errno.ECONNREFUSED
                    else f"connection failed: {errno.errorcode.get(err, str(err))} ({os.strerror(err)})"
                )
                continue
            if origin.scheme == "https":
                sock = _tls_context().wrap_socket(sock, server_hostname=origin.host, do_handshake_on_connect=False)
                ex.handshake = True
            ex.conn = _Conn(origin, sock)
            budget.opened(ex.conn)
            ex.state = "connect"
            return
        raise last or ex.fail("no address to connect to")
