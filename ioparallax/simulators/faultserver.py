"""The fault-injecting HTTP server the Prism and Stargate simulators serve on.

:class:`SimServer` is a threading HTTP/1.1 server that knows its open connections (so that a
stop, or a ``refused`` fault, resets the kept-alive ones too, as a stopping server does) and logs a
client that hung up as one debug line, not a traceback. :class:`SimHandler` hands every request
to the simulator's ``dispatch(handler, method)`` and answers in one write. :func:`answer_fault`
and :func:`send_truncated` are the faults, one behaviour each, whichever simulator sets them:

==============  ================================================================================
``slow``        sleep ``delay`` seconds, then answer normally
``http_500``    ``500`` with the simulator's error body
``truncated``   the answer cut at the simulator's point, with a matching ``Content-Length``; with
                ``abort`` the full length is announced, the cut part sent, the connection dropped
``garbage``     ``200`` with binary bytes that are no document of the announced type
``refused``     the connection is shut down without an answer (the Stargate simulator also
                closes the CVM's listening socket while the fault lasts)
==============  ================================================================================
"""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_MODES = ("slow", "http_500", "truncated", "garbage", "refused")


@dataclass
class Fault:
    """One fault: its ``mode`` (:data:`FAULT_MODES`), ``delay`` (``slow``: seconds before
    answering), ``only`` (the scope it is limited to, the simulator's names; ``all``: every
    request), ``until`` (epoch, real time, when it ends; None: until cleared)."""

    mode: str
    delay: float = 0.0
    only: str = "all"
    until: float | None = None

    @property
    def expired(self) -> bool:
        return self.until is not None and time.time() >= self.until


def check_mode(mode: str) -> None:
    if mode not in FAULT_MODES:
        raise ValueError(f"unknown fault mode {mode!r} (one of {', '.join(FAULT_MODES)})")


def ends_at(duration: float | None) -> float | None:
    """``until`` for a fault lasting ``duration`` seconds from now (None or 0: until cleared)."""
    return time.time() + float(duration) if duration else None


class SimServer(ThreadingHTTPServer):
    """A simulator's HTTP server: each request goes to ``dispatch(handler, method)``; ``name``
    labels its log lines."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        addr: tuple[str, int],
        dispatch: Callable[[SimHandler, str], None],
        log: logging.Logger,
        name: str = "",
        handler: type[SimHandler] | None = None,
        owner: Any = None,
    ):
        self.dispatch = dispatch
        self.log = log
        self.name = name
        self.owner = owner  # what the handler may ask (the Prism simulator's clock for Date)
        self.connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        super().__init__(addr, handler or SimHandler)

    def process_request_thread(self, request, client_address) -> None:  # noqa: ANN001
        with self._conn_lock:
            self.connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conn_lock:
                self.connections.discard(request)

    def drop_connections(self) -> None:
        """Reset the kept-alive connections too, as a server that stops does."""
        with self._conn_lock:
            conns = list(self.connections)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        # A client hanging up before its answer is written (an exporter at its probe deadline, a
        # scrape cancelled) is routine here: one debug line, not socketserver's traceback on stderr.
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            self.log.debug("%s client %s hung up: %s", self.name, client_address[0], exc)
            return
        super().handle_error(request, client_address)


class SimHandler(BaseHTTPRequestHandler):
    """Hands each request to the server's ``dispatch``; answers with :meth:`send_body`."""

    server: SimServer
    protocol_version = "HTTP/1.1"
    # Headers and body are separate writes: without TCP_NODELAY, Nagle's algorithm and the
    # client's delayed ACK stall every keep-alive response by ~40 ms.
    disable_nagle_algorithm = True
    # http.server's own header buffer (created by send_response, not in typeshed): send_body appends
    # the body to it so that headers and body go out in one write.
    _headers_buffer: list[bytes]
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        self.server.log.debug("%s %s %s", self.server.name, self.address_string(), format % args)

    def do_GET(self) -> None:  # noqa: N802
        self.server.dispatch(self, "GET")

    def do_POST(self) -> None:  # noqa: N802
        self.server.dispatch(self, "POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self.server.dispatch(self, "DELETE")

    def send_body(self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        # One write for headers and body (end_headers() would flush the headers alone).
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(body)
        self.flush_headers()

    def drop(self) -> None:
        """End the connection without an answer."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


#: A control's answer: its body and content type (None: no such control).
Answer = tuple[bytes, str]
OK: Answer = (b"ok\n", "text/plain")


def state_answer(state: dict[str, Any]) -> Answer:
    return json.dumps(state, indent=1).encode(), "application/json"


def control(h: SimHandler, act: Callable[[], Answer | None], docs: str) -> None:
    """Answer a ``/-/sim/`` control (never faulted): ``act()``'s answer; 400 with the reason of
    the ValueError it raised; 404 naming ``docs`` when it knows no such control."""
    try:
        answer = act()
    except ValueError as exc:
        h.send_body(400, f"{exc}\n".encode(), "text/plain")
        return
    if answer is None:
        h.send_body(404, f"unknown control endpoint (see {docs})\n".encode(), "text/plain")
        return
    h.send_body(200, *answer)


def garbage(path: str) -> bytes:
    """Binary bytes that are no HTML, JSON or text (a gzip magic inside), the same for a path."""
    return b"\x89\x00\xffGARBAGE\x1f\x8b" + hashlib.sha256(path.encode()).digest() * 64


def answer_fault(h: SimHandler, fault: Fault | None, error: tuple[bytes, str], garbage_type: str) -> bool:
    """The part of ``fault`` that comes before the answer: True when it answered the request (or
    dropped it), False when the simulator answers (after ``slow``'s sleep; ``truncated`` is
    :func:`send_truncated`). ``error``: ``http_500``'s body and content type."""
    if fault is None:
        return False
    if fault.mode == "refused":
        h.drop()
        return True
    if fault.mode == "slow":
        time.sleep(fault.delay)
    elif fault.mode == "http_500":
        h.send_body(500, *error)
        return True
    elif fault.mode == "garbage":
        h.send_body(200, garbage(h.path), garbage_type)
        return True
    return False


def send_truncated(
    h: SimHandler,
    status: int,
    body: bytes,
    ctype: str,
    cut: int,
    abort: bool = False,
    headers: dict[str, str] | None = None,
) -> None:
    """``truncated``: ``body[:cut]`` with its own length, or with ``abort`` the full length
    announced, ``body[:cut]`` sent and the connection dropped."""
    if not abort:
        h.send_body(status, body[:cut], ctype, headers)
        return
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body[:cut])
    h.wfile.flush()
    h.drop()
