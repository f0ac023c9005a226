"""The Stargate exporter's HTTP/1.1 transport (client.py) against raw servers on loopback: framing
(Content-Length, chunked, close-delimited, interim 1xx), keep-alive reuse and its retry, limits,
the deadline, names and TLS. Pages are the simulator's real ones where a body matters."""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator

import pytest

from ioparallax.exporters.stargate import client
from ioparallax.exporters.stargate.address import parse_target
from ioparallax.exporters.stargate.client import Budget, DeadlineExceeded, FetchError, HttpClient, Limits
from ioparallax.exporters.stargate.target import probe
from tests.exporters.stargate.hostile import HostileStargate, real_pages, response
from tests.exporters.stargate.support import get
from tests.support import self_signed_cert


@pytest.fixture(scope="module")
def page() -> bytes:
    _, details = real_pages(1)
    return next(iter(details.values())).encode()


def fetch(fake: HostileStargate, paths: list[str], seconds: float = 5.0, concurrency: int = 2, limits=Limits()):
    origin = parse_target(fake.target).origin
    budget = Budget(time.monotonic() + seconds, limits)
    try:
        got = dict(HttpClient().get_many([(origin, p) for p in paths], budget, concurrency))
    finally:
        budget.close()
    return [got[i] for i in range(len(paths))]


def pieces(data: bytes, size: int = 7) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def chunked(body: bytes, size: int = 1000) -> bytes:
    out = b"".join(
        f"{len(body[i : i + size]):x};ext=1\r\n".encode() + body[i : i + size] + b"\r\n"
        for i in range(0, len(body), size)
    )
    return out + b"0\r\nX-Trailer: yes\r\n\r\n"


def test_content_length_pages_reuse_their_connections(page):
    with HostileStargate(lambda p: response(page)) as fake:
        got = fetch(fake, [f"/vdisk_stats?id={i}" for i in range(40)], concurrency=3)
        assert got == [page] * 40
        assert len(fake.threads) <= 3  # keep-alive: one connection per request in flight
        assert fake.requests == [f"/vdisk_stats?id={i}" for i in range(40)] or sorted(fake.requests) == sorted(
            f"/vdisk_stats?id={i}" for i in range(40)
        )


def test_chunked_body_in_small_pieces_with_an_interim_answer(page):
    head = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    with HostileStargate(lambda p: pieces(head + chunked(page), 5)) as fake:
        assert fetch(fake, ["/a", "/b"]) == [page, page]


def test_chunked_body_kept_alive(page):
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(page, 333)
    with HostileStargate(lambda p: answer) as fake:
        assert fetch(fake, [f"/{i}" for i in range(10)], concurrency=1) == [page] * 10
        assert len(fake.threads) == 1


def test_close_delimited_body_is_read_to_the_end_and_not_reused(page):
    answer = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + page
    with HostileStargate(lambda p: pieces(answer, 4096)) as fake:
        assert fetch(fake, ["/a", "/b", "/c"], concurrency=1) == [page] * 3
        assert len(fake.threads) == 3


def test_a_kept_alive_connection_closed_by_the_server_is_retried_once(page):
    # The server answers with a length (so the client keeps the connection), then closes it:
    # the next request on it meets a closed connection and goes again on a new one.
    with HostileStargate(lambda p: iter([response(page)])) as fake:
        assert fetch(fake, ["/a", "/b", "/c"], concurrency=1) == [page] * 3
        assert len(fake.threads) == 3


def test_bytes_past_the_content_length_end_the_connection(page):
    with HostileStargate(lambda p: response(page) + b"HTTP/1.1 200 OK\r\n") as fake:
        assert fetch(fake, ["/a", "/b"], concurrency=1) == [page] * 2
        assert len(fake.threads) == 2


@pytest.mark.parametrize(
    "answer, cause",
    [
        (lambda b: response(b, "404 Not Found"), "HTTP 404"),
        (lambda b: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunked encoding"),
        (lambda b: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n" + b, "unsupported Transfer-Encoding"),
        (lambda b: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "response cut off (3 of 10 bytes)"),
        (lambda b: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "response cut off"),
        (lambda b: b"HTTP/1.1 200 OK\r\nContent-Len", "response cut off in its headers"),
        (lambda b: b"", "connection closed by the server before answering"),
        (lambda b: b"SSH-2.0-OpenSSH\r\n\r\n", "BadStatusLine"),
        (lambda b: b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "bad header line"),
        (lambda b: b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n", "response headers over 65536 bytes"),
        (lambda b: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(b * 200), "body_size_limit"),
        (lambda b: b"HTTP/1.1 200 OK\r\n\r\n" + b * 200, "body_size_limit"),
    ],
    ids=[
        "404",
        "chunk-size",
        "gzip",
        "cut-length",
        "cut-chunked",
        "cut-head",
        "empty",
        "ssh",
        "header",
        "huge-head",
        "chunked-huge",
        "close-huge",
    ],
)
def test_broken_answers_cost_their_page_with_the_cause(page, answer, cause):
    with HostileStargate(lambda p: iter([answer(page)]) if p == "/bad" else response(page)) as fake:
        good, bad = fetch(fake, ["/good", "/bad"], limits=Limits(body_size_limit=len(page) * 10))
        assert good == page
        assert isinstance(bad, FetchError) and not isinstance(bad, DeadlineExceeded)
        assert cause in str(bad) and f"{fake.target}/bad" in str(bad)


def test_deadline_ends_the_call_with_what_was_pending(page):
    hold = threading.Event()

    def answer(path: str):
        if path == "/slow":
            hold.wait(10)
        return response(page)

    with HostileStargate(answer) as fake:
        start = time.monotonic()
        origin = parse_target(fake.target).origin
        budget = Budget(start + 0.5)
        seen = []
        with pytest.raises(DeadlineExceeded) as err:
            for i, _ in HttpClient().get_many([(origin, "/slow"), (origin, "/a"), (origin, "/slow")], budget, 2):
                seen.append(i)
        took = time.monotonic() - start
        budget.close()
        hold.set()
    assert 0.5 <= took < 0.8
    assert seen == [1] and err.value.pending == 2


def test_refused_and_names(page):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        budget = Budget(time.monotonic() + 2)
        with pytest.raises(FetchError, match="connection refused"):
            get(HttpClient(), parse_target(f"127.0.0.1:{port}").origin, "/", budget)
    with HostileStargate(lambda p: response(page)) as fake:
        budget = Budget(time.monotonic() + 5)
        origin = parse_target(f"localhost:{fake.port}").origin
        got = dict(HttpClient().get_many([(origin, f"/{i}") for i in range(6)], budget, 3))
        assert list(got.values()) == [page] * 6 and len(fake.threads) == 3
        assert list(budget.resolved) == ["localhost"]  # resolved once for the probe's 3 connections
        budget.close()


def test_request_paths_are_checked(page):
    with HostileStargate(lambda p: response(page)) as fake:
        [got] = fetch(fake, ["/a b\r\nX: y"])
        assert isinstance(got, FetchError) and "not a request path" in str(got)
        assert fake.requests == []


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"), "cvm")


def _tls_server(cert, key, body: bytes):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = lsock.accept()
            except OSError:
                return
            try:
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    for _ in range(3):
                        data = b""
                        while b"\r\n\r\n" not in data:
                            chunk = tls.recv(4096)
                            if not chunk:
                                break
                            data += chunk
                        if not data:
                            break
                        tls.sendall(response(body))
            except (OSError, ssl.SSLError):
                pass

    threading.Thread(target=serve, daemon=True).start()
    return lsock


def test_https_pages_are_verified(page, tls_cert, monkeypatch):
    cert, key = tls_cert
    lsock = _tls_server(cert, key, page)
    origin = parse_target(f"https://127.0.0.1:{lsock.getsockname()[1]}/").origin
    try:
        budget = Budget(time.monotonic() + 5)
        with pytest.raises(FetchError, match="TLS error: CERTIFICATE_VERIFY_FAILED"):
            get(HttpClient(), origin, "/", budget)
        budget.close()
        trusting = ssl.create_default_context(cafile=str(cert))
        monkeypatch.setattr(client, "_TLS", trusting)
        budget = Budget(time.monotonic() + 5)
        got = dict(HttpClient().get_many([(origin, "/a"), (origin, "/b"), (origin, "/c")], budget, 1))
        budget.close()
        assert list(got.values()) == [page] * 3
    finally:
        lsock.close()


def _resolver(tmp_path, script: str) -> tuple[str, ...]:
    """A stand-in for ``getent ahosts`` (client.RESOLVER): a shell script answering for cvm.test."""
    path = tmp_path / "resolver"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return (str(path),)


def test_a_name_whose_first_address_refuses_is_tried_at_the_next(page, monkeypatch, tmp_path):
    with socket.socket() as dead:
        dead.bind(("127.0.0.1", 0))  # bound, not listening: refused
        with HostileStargate(lambda p: response(page)) as fake:
            # getent's format: each address on a STREAM line (then its DGRAM and RAW lines).
            answer = "".join(
                f"127.0.0.{n}       {kind}\\n" for n in (1, 1) for kind in ("STREAM cvm.test", "DGRAM", "RAW")
            )
            monkeypatch.setattr(client, "RESOLVER", _resolver(tmp_path, f'[ "$1" = cvm.test ] && printf "{answer}"'))
            budget = Budget(time.monotonic() + 5)
            addrs = client.resolve(parse_target(f"cvm.test:{fake.port}").origin, budget)
            assert addrs == [(socket.AF_INET, ("127.0.0.1", fake.port))]  # duplicates dropped
            budget.resolved["cvm.test"] = [
                (socket.AF_INET, ("127.0.0.1", dead.getsockname()[1])),
                (socket.AF_INET, ("127.0.0.1", fake.port)),
            ]
            origin = parse_target(f"cvm.test:{fake.port}").origin
            assert get(HttpClient(), origin, "/", budget) == page
            assert fake.threads  # the second address answered
            budget.close()


def test_a_name_that_does_not_resolve_costs_its_page_with_the_cause(page, monkeypatch, tmp_path):
    monkeypatch.setattr(client, "RESOLVER", _resolver(tmp_path, "exit 2"))
    budget = Budget(time.monotonic() + 5)
    with pytest.raises(FetchError, match=r"http://nowhere.test:2009/: cannot resolve 'nowhere.test': unknown name"):
        get(HttpClient(), parse_target("nowhere.test:2009").origin, "/", budget)
    budget.close()


def _children() -> set[int]:
    me = os.getpid()
    out = set()
    for task in os.listdir(f"/proc/{me}/task"):
        with open(f"/proc/{me}/task/{task}/children") as f:
            out.update(int(c) for c in f.read().split())
    return out


def test_a_resolver_that_hangs_costs_the_deadline_and_leaves_nothing_running(page, monkeypatch, tmp_path):
    """A name whose resolution never answers: the probe ends at its deadline with the cause, and
    leaves no thread and no process behind (the resolver child is killed and reaped)."""
    monkeypatch.setattr(client, "RESOLVER", _resolver(tmp_path, "exec sleep 30"))
    # Threads this test started, not the count: an earlier test's thread may end meanwhile (a
    # loaded machine showed 1 where 2 were counted before).
    threads, children = set(threading.enumerate()), _children()
    start = time.monotonic()
    result = probe(HttpClient(), "cvm.test:2009", start + 0.6)
    took = time.monotonic() - start
    assert not result.up and "deadline exceeded" in result.error and "main page" in result.error
    assert 0.5 <= took < 2  # the resolver would hang 30 s
    assert set(threading.enumerate()) <= threads, threading.enumerate()
    assert _children() == children  # the resolver child is gone (killed and reaped, no zombie)
    # The same through the whole budget of a direct fetch, with its cause.
    budget = Budget(time.monotonic() + 0.3)
    with pytest.raises(DeadlineExceeded, match="deadline exceeded resolving 'cvm.test'"):
        get(HttpClient(), parse_target("cvm.test:2009").origin, "/", budget)
    budget.close()
    assert set(threading.enumerate()) <= threads and _children() == children
