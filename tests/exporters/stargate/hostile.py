"""A hostile fake Stargate and a canary, on loopback, for the Stargate exporter's fault suite.

:class:`HostileStargate` serves real pages of the Stargate simulator (rendered once, frozen clock)
over a raw socket, so that it can also misbehave the ways a real server or an attacker can:
trickle bytes, send broken headers, send a huge body, list foreign links. :class:`Canary` is a
server that must never be contacted: it records every connection it accepts.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable, Iterator

import lxml.etree

from ioparallax.simulators.stargate.server import StargateCluster
from tests.support import Listener

FROZEN = 1_700_000_000.0


def real_pages(vdisks: int = 3) -> tuple[str, dict[int, str]]:
    """The simulator's main page of a CVM hosting ``vdisks`` vdisks, and each vdisk's detail view."""
    sim = StargateCluster("clean-oltp", vdisk_count=vdisks, clock=lambda: FROZEN)
    cvm = next(iter(sim.cvms))
    main = sim.render_main(cvm)
    details = {d.vdisk_id: sim.render_detail(cvm, d.vdisk_id) for d in sim.hosted(cvm)}
    return main, details


def vdisk_ids(main: str) -> list[int]:
    return [int(m) for m in re.findall(r"vdisk_id=(\d+)|[?&]id=(\d+)", main) for m in m if m]


def set_cell(main: str, vdisk_id: int, column: str, value: str) -> str:
    """The main page with one Hosted VDisks cell (``column`` as the parser keys it) replaced."""
    from ioparallax.exporters.stargate.parse import _banner_tables, _cells, _header_keys, _text

    doc = lxml.etree.fromstring(main.encode(), lxml.etree.HTMLParser(encoding="utf-8"))
    banners = _banner_tables(doc)
    table = banners["hosted vdisks"] if "hosted vdisks" in banners else banners["hosted active vdisks"]
    keys, rows = _header_keys(table)
    col = keys.index(column)
    for row in rows:
        cells = _cells(row)
        if _text(cells[0]) == str(vdisk_id):
            cell = cells[col]
            for child in list(cell):
                if column != "VDisk Id":
                    cell.remove(child)
            if column == "VDisk Id":
                cell[0].text = value
            else:
                cell.text = value
            return lxml.etree.tostring(doc, method="html", encoding="unicode")
    raise KeyError(vdisk_id)


def set_links(main: str, vdisk_href: Callable[[str], str] | None = None, cluster: list[str] | None = None) -> str:
    """Rewrite the vdisk links (``vdisk_href(old) -> new``) and/or the Cluster State links."""
    if vdisk_href is not None:
        main = re.sub(r'href="(/vdisk_stats[^"]*)"', lambda m: f'href="{vdisk_href(m.group(1))}"', main)
    if cluster is not None:
        rows = "".join(f'<tr><td>{i}</td><td><a href="{u}">{u}</a></td><td></td></tr>' for i, u in enumerate(cluster))
        main = re.sub(
            r"(Cluster(&nbsp;| |\xa0)State.*?<table[^>]*>\s*<tr><th>.*?</tr>).*?(</table>)",
            lambda m: m.group(1) + rows + m.group(3),
            main,
            count=1,
            flags=re.S,
        )
    return main


def set_bucket(detail: str, section: str, count: str) -> str:
    """The detail view with the first bucket count of ``section`` (e.g. 'Frontend Read Latency')."""
    pat = re.compile(rf"({re.escape(section)}</.*?<tr><td>[^<]*</td><td>[^<]*</td><td>)([^<]*)(</td>)", re.S)
    out, n = pat.subn(lambda m: m.group(1) + count + m.group(3), detail, count=1)
    assert n == 1, section
    return out


def response(body: bytes, status: str = "200 OK", headers: list[tuple[str, str]] | None = None) -> bytes:
    hdrs = headers if headers is not None else [("Content-Length", str(len(body)))]
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/html\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs) + "\r\n"
    return head.encode("latin-1") + body


#: What the fake answers for a request path: bytes (sent at once), or an iterator of byte
#: chunks, sent one by one (a trickle sleeps between them), then the connection is closed.
Answer = bytes | Iterator[bytes]


class Canary(Listener):
    """Must never be contacted: ``connections`` counts every accepted connection and ``data``
    keeps what was sent on them."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        self.connections = 0
        self.data: list[bytes] = []
        super().__init__(host, port)

    def serve(self, conn: socket.socket) -> None:
        self.connections += 1
        conn.settimeout(1)
        try:
            self.data.append(conn.recv(4096))
        except OSError:
            pass
        conn.close()


class HostileStargate(Listener):
    """Serves ``answers(path) -> Answer`` for every GET, keep-alive while answers are bytes.
    ``requests`` lists the paths asked for."""

    def __init__(self, answer: Callable[[str], Answer], host: str = "127.0.0.1", port: int = 0):
        self.answer = answer
        self.requests: list[str] = []
        super().__init__(host, port)

    @property
    def target(self) -> str:
        return self.address

    def serve(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                path = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
                self.requests.append(path)
                out = self.answer(path)
                if isinstance(out, bytes):
                    conn.sendall(out)
                    continue
                for piece in out:
                    conn.sendall(piece)
                return
        except OSError:
            return
        finally:
            conn.close()


def trickle(data: bytes, every: float = 0.2) -> Iterator[bytes]:
    """``data`` a byte at a time, ``every`` seconds apart (each read of the client gets a byte
    well within any per-read timeout)."""
    for i in range(len(data)):
        yield data[i : i + 1]
        time.sleep(every)


def huge(size: int, content_length: bool) -> Iterator[bytes]:
    """A ``size``-byte page, generated on the fly (never held by the server)."""
    head = [("Content-Length", str(size))] if content_length else [("Connection", "close")]
    yield response(b"", headers=head)
    chunk = b"<tr><td>" + b"x" * 1015 + b"</td></tr>\n"
    sent = 0
    while sent < size:
        piece = chunk[: size - sent]
        yield piece
        sent += len(piece)
