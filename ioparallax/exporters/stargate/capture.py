"""Captures of what one probe fetched, anonymized, and their replay (issue 26).

``stargate-exporter capture --target <cvm> -o capture.tar.gz`` runs one probe, exactly as the
exporter runs it (target.py with the exporter's own :class:`~.transport.HttpClient`: the same
allow-list, limits, deadline and links followed), through a :class:`RecordingClient` that keeps
every page it fetched, with its status, size and timing. The pages are then anonymized
(:func:`anonymize`, on by default) and written with a manifest and the metrics that replaying
the written pages gives. ``stargate-exporter --replay capture.tar.gz`` serves probes from a
capture (:class:`ReplayClient` in place of the HTTP client), and ``stargate-exporter replay
capture.tar.gz`` prints the metrics of one replayed probe: a capture is a test fixture as it is
(tests/captures/).

The archive (tar, gzip):

- ``manifest.json``: format, exporter and version, when, the target, the probe's settings and
  outcome, and for every page fetched: URL, kind (main or detail), HTTP status, bytes, seconds
  from request to answer, when it was requested (seconds after the start), the page build
  (Overview's Build version of its CVM), the fetch error if any, and its file;
- ``pages/NNNNN.html``: the pages, as fetched (anonymized unless ``--no-anonymize``);
- ``metrics.prom``: the exposition of the probe replayed from these pages;
- ``README.txt``: what this is and how to look at it.

Reading a capture never extracts anything to disk: members are read by name into memory, only
regular files, each and all together within a size limit (a capture may come from anyone).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import lxml.etree

from ioparallax.exporters.common import capture as archive
from ioparallax.exporters.common.anonymize import Anonymizer
from ioparallax.exporters.common.capture import MANIFEST, CaptureError
from ioparallax.exporters.stargate.address import Origin, TargetError, TargetPolicy, parse_target
from ioparallax.exporters.stargate.client import Budget, DeadlineExceeded, FetchError, HttpClient, Limits
from ioparallax.exporters.stargate.collector import Collectors, StargateCollector
from ioparallax.exporters.stargate.parse import _cells, _header_keys, _rows, _text
from ioparallax.exporters.stargate.target import DEFAULT_CONCURRENCY, ProbeResult, probe
from ioparallax.version import revision, version

log = logging.getLogger(__name__)

FORMAT = 1
KIND = "stargate-capture"
_STATUS = re.compile(r"HTTP ([0-9]{3})$")


@dataclass
class CapturedPage:
    url: str
    kind: str = "detail"  # "main" or "detail"
    status: int | None = None  # HTTP status (None: no answer, see error)
    size: int = 0  # bytes fetched
    seconds: float | None = None  # from the request to the last byte
    offset: float = 0.0  # seconds after the capture started when it was requested
    error: str = ""
    build: str = ""
    file: str = ""
    body: bytes | None = None

    def manifest(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "kind": self.kind,
            "status": self.status,
            "bytes": self.size,
            "seconds": None if self.seconds is None else round(self.seconds, 6),
            "requested_at": round(self.offset, 6),
            "build": self.build,
            "error": self.error,
            "file": self.file,
        }


@dataclass
class Capture:
    manifest: dict[str, Any]
    pages: list[CapturedPage]
    metrics: str = ""
    source: str = "capture"  # the file it was read from (for messages)
    _by_url: dict[str, CapturedPage] = field(default_factory=dict, repr=False)

    @property
    def target(self) -> str:
        return str(self.manifest.get("target", ""))

    @property
    def discover(self) -> bool:
        return bool(self.manifest.get("discover", False))

    def page(self, url: str) -> CapturedPage | None:
        if not self._by_url:
            self._by_url = {p.url: p for p in self.pages}
        return self._by_url.get(url)

    def origins(self) -> list[Origin]:
        out: dict[tuple[str, str, int], Origin] = {}
        for p in self.pages:
            try:
                o = parse_target(_origin_of(p.url)).origin
            except ValueError:
                continue
            out[(o.scheme, o.host, o.port)] = o
        return list(out.values())

    def policy(self) -> TargetPolicy:
        """The allow-list of a replay: the hosts the capture holds pages of."""
        return TargetPolicy(sorted({o.host for o in self.origins()}))

    def ports(self) -> tuple[int, ...]:
        return tuple(sorted({o.port for o in self.origins()}))


# ----------------------------------------------------------------------------------- recording
class RecordingClient:
    """A page client that fetches through ``inner`` (the exporter's own HTTP client) and keeps
    every page, answered or not, in ``pages``."""

    def __init__(self, inner: HttpClient) -> None:
        self.inner = inner
        self.pages: list[CapturedPage] = []
        self.start = time.monotonic()

    def get_many(
        self, wanted: Sequence[tuple[Origin, str]], budget: Budget, concurrency: int = DEFAULT_CONCURRENCY
    ) -> Iterator[tuple[int, bytes | FetchError]]:
        started: dict[int, float] = {}
        answered: set[int] = set()

        def requested(i: int) -> None:
            started.setdefault(i, time.monotonic())

        self.inner.on_request = requested
        try:
            for i, got in self.inner.get_many(wanted, budget, concurrency):
                answered.add(i)
                self._record(wanted[i], got, started.get(i), time.monotonic())
                yield i, got
        except DeadlineExceeded:
            for i, w in enumerate(wanted):
                if i not in answered:
                    cause = "deadline exceeded" + ("" if i in started else " before the request")
                    self._record(w, FetchError(cause), started.get(i), None)
            raise
        finally:
            self.inner.on_request = None

    def _record(self, want: tuple[Origin, str], got: bytes | FetchError, began: float | None, ended: float | None):
        origin, path = want
        page = CapturedPage(f"{origin.scheme}://{origin.netloc}{path}")
        page.offset = (began if began is not None else time.monotonic()) - self.start
        if began is not None and ended is not None:
            page.seconds = ended - began
        if isinstance(got, bytes):
            page.status, page.size, page.body = 200, len(got), got
        else:
            page.error = str(got)
            m = _STATUS.search(page.error)
            page.status = int(m.group(1)) if m else None
        self.pages.append(page)


# -------------------------------------------------------------------------------- replaying
class ReplayClient:
    """A page client that answers from a capture: a page it holds (or the fetch error it
    recorded), and ``not in the capture`` for any other URL. Limits apply as to real fetches."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture

    def get_many(
        self, wanted: Sequence[tuple[Origin, str]], budget: Budget, concurrency: int = DEFAULT_CONCURRENCY
    ) -> Iterator[tuple[int, bytes | FetchError]]:
        for i, (origin, path) in enumerate(wanted):
            url = f"{origin.scheme}://{origin.netloc}{path}"
            if budget.remaining() <= 0:
                raise DeadlineExceeded(f"{url}: deadline exceeded", len(wanted) - i)
            try:
                budget.take_page(url)
            except FetchError as exc:
                yield i, exc
                continue
            page = self.capture.page(url)
            if page is None:
                yield i, FetchError(f"{url}: not in the capture {self.capture.source}")
            elif page.body is None:
                yield i, FetchError(page.error or f"{url}: no answer recorded")
            elif len(page.body) > budget.limits.body_size_limit:
                yield (
                    i,
                    FetchError(
                        f"{url}: page is over body_size_limit ({budget.limits.body_size_limit} bytes); not read further"
                    ),
                )
            else:
                yield i, page.body


def replay(
    capture: Capture,
    collectors: Collectors = Collectors(),
    timeout: float = 30.0,
    limits: Limits = Limits(),
    concurrency: int = DEFAULT_CONCURRENCY,
) -> tuple[ProbeResult, bytes]:
    """One probe of the capture's target, answered from the capture: the result and its
    exposition (as /probe answers it, without vdisk names from YAML or Prism)."""
    result = probe(
        ReplayClient(capture),
        capture.target,
        time.monotonic() + timeout,
        discover=capture.discover,
        concurrency=concurrency,
        limits=limits,
        policy=capture.policy(),
        discovery_ports=capture.ports(),
    )
    return result, StargateCollector(result, {}, collectors).render()


# ------------------------------------------------------------------------------ anonymizing
#: A column or Overview key naming something: its cells are learnt as names (vdisk names, NFS
#: paths, VMs, hosts, containers...). Matched against the column or key as the page writes it.
_NAMING = re.compile(
    r"name|path|host|handle|\bvms?\b|container|datastore|cluster|file|node|owner|user|address|\bip\b|serial|domain",
    re.IGNORECASE,
)
#: Paths in a page's text (not its links): two or more segments, e.g. an NFS path.
_TEXT_PATH = re.compile(r"(?<![\w/.])/[^\s/<>\"']+(?:/[^\s<>\"']+)+")
#: ``[datastore] dir/file.vmdk``
_DATASTORE_PATH = re.compile(r"\[[^\]\n]{1,100}\] ?[^\s<>\"']+")

_HTML = lxml.etree.HTMLParser(remove_comments=True, encoding="utf-8")


def learn(anon: Anonymizer, body: bytes) -> None:
    """What a page names: hosts of its links and URLs, cells of its naming columns and Overview
    keys, paths in its text. The build version is kept as it is. (Most tables name nothing: a
    table's header is looked at before its rows.)"""
    anon.learn_text(body, markup=True)
    try:
        doc = lxml.etree.fromstring(body, _HTML)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return
    if doc is None:
        return
    for table in doc.iter("table"):
        heads = [_text(th) for th in table.iter("th")]
        if heads:
            if not any(_NAMING.search(h) for h in heads):
                continue
            keys, data = _header_keys(table)
            naming = [(i, "vdisk" if "vdisk" in k.lower() else "name") for i, k in enumerate(keys) if _NAMING.search(k)]
            for row in data:
                cells = _cells(row)
                for i, kind in naming:
                    if i < len(cells):
                        anon.name(_text(cells[i]), kind)
            continue
        for row in _rows(table):  # a key | value table (Overview)
            cells = _cells(row, 3)
            if len(cells) != 2:
                continue
            key = _text(cells[0])
            if key.lower() == "build version":
                anon.keep(_text(cells[1]))
            elif _NAMING.search(key):
                anon.name(_text(cells[1]))
    for text in doc.itertext():
        if "/" in text or "[" in text:
            for m in _TEXT_PATH.finditer(text):
                anon.name(m.group(0))
            for m in _DATASTORE_PATH.finditer(text):
                anon.name(m.group(0))


def anonymize(capture: Capture, redact: Sequence[str] = (), free_text: bool = False) -> Anonymizer:
    """Replace the capture's names, addresses and UUIDs (pages, URLs, errors, target) in place,
    consistently (common/anonymize.py; ``free_text``: e-mail addresses, host-name-shaped words,
    Windows paths and query values too); returns the anonymizer (its ``summary()``)."""
    anon = Anonymizer(redact, free_text)
    anon.urls(parse_target(capture.target).url if capture.target else "")
    for p in sorted(capture.pages, key=lambda p: p.kind != "main"):  # main pages name most things
        anon.urls(p.url)
        if p.body is not None:
            learn(anon, p.body)
    for p in capture.pages:
        p.url = anon.text(p.url)
        p.error = anon.text(p.error)
        if p.body is not None:
            p.body = anon.bytes(p.body, markup=True)
    capture.manifest["target"] = anon.text(capture.target)
    capture.manifest["error"] = anon.text(str(capture.manifest.get("error", "")))
    capture.manifest["anonymized"] = True
    capture.manifest["anonymization"] = anon.summary()
    capture._by_url = {}
    return anon


# --------------------------------------------------------------------------------- capturing
def capture(
    target: str,
    *,
    timeout: float = 10.0,
    discover: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
    limits: Limits = Limits(),
    policy: TargetPolicy | None = None,
    discovery_ports: tuple[int, ...] = (),
    client: HttpClient | None = None,
) -> tuple[Capture, ProbeResult]:
    """One probe of ``target`` as the exporter runs it, every page it fetched kept (not yet
    anonymized). ``timeout``: the probe's deadline, as Prometheus' scrape timeout less 0.5 s."""
    recorder = RecordingClient(client or HttpClient())
    created = datetime.now(UTC)
    result = probe(
        recorder,
        target,
        time.monotonic() + timeout,
        discover=discover,
        concurrency=concurrency,
        limits=limits,
        policy=policy,
        discovery_ports=discovery_ports,
    )
    builds: dict[str, str] = {}
    mains: set[str] = set()
    for cvm in result.cvms:
        mains.add(cvm.url)
        if cvm.page is not None:
            builds[_origin_of(cvm.url)] = cvm.page.overview.get("Build version", "")
    for n, p in enumerate(recorder.pages):
        p.kind = "main" if p.url in mains else "detail"
        p.build = builds.get(_origin_of(p.url), "")
        if p.body is not None:
            p.file = f"pages/{n:05d}-{p.kind}.html"
    manifest = {
        "format": FORMAT,
        "kind": KIND,
        "exporter": "stargate-exporter",
        "version": version(),
        "revision": revision(),
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": target,
        "discover": discover,
        "deadline_seconds": timeout,
        "concurrency": concurrency,
        "body_size_limit": limits.body_size_limit,
        "max_pages_per_probe": limits.max_pages,
        "up": result.up,
        "error": result.error,
        "duration_seconds": round(result.duration, 6),
        "vdisks": len(result.vdisks),
        "anonymized": False,
    }
    return Capture(manifest, recorder.pages), result


def _origin_of(url: str) -> str:
    parts = url.split("/", 3)
    return "/".join(parts[:3])


_README = """\
A capture of what stargate-exporter fetched in one probe (issue 26 of ioparallax).

manifest.json   the exporter's version, the target, the probe's settings and outcome, and per
                page: URL, kind, HTTP status, bytes, seconds, page build, error, file
pages/          the pages as fetched{anonymized}
metrics.prom    the metrics the exporter makes of these pages (a replay of them)

Look at it:   tar -xzf {name} && less manifest.json
Replay it:    stargate-exporter replay {name}              (prints the metrics)
              stargate-exporter --replay {name}            (serves /probe?target={target})
"""


def write(cap: Capture, path: str, metrics: bytes) -> int:
    """Write the archive; returns its size in bytes. CaptureError names the file and the cause."""
    cap.manifest["pages"] = [p.manifest() for p in cap.pages]
    files = [(p.file, p.body) for p in cap.pages if p.body is not None and p.file]
    return archive.write_archive(path, cap.manifest, _README, metrics, files, target=cap.target)


def read(path: str) -> Capture:
    """A capture read back (nothing extracted to disk). CaptureError names the file and the cause."""
    manifest, files = archive.read_archive(path, KIND, FORMAT, "stargate-exporter capture")
    pages = []
    for i, entry in enumerate(archive.entries(manifest, "pages", path)):
        try:
            page = CapturedPage(
                url=archive.field_str(entry, "url", ""),
                kind=archive.field_str(entry, "kind", "detail"),
                status=archive.field_int(entry, "status", None, 100, 999),
                size=archive.field_int(entry, "bytes"),
                seconds=archive.field_float(entry, "seconds", None),
                offset=archive.field_float(entry, "requested_at", lo=-archive.MAX_FIELD_NUMBER),
                error=archive.field_str(entry, "error"),
                build=archive.field_str(entry, "build"),
                file=archive.field_str(entry, "file"),
            )
        except ValueError as exc:
            raise CaptureError(f"{path}: {MANIFEST}: pages[{i}]: {exc}") from None
        if not page.url:
            raise CaptureError(f"{path}: {MANIFEST}: pages[{i}]: no url")
        if page.file:
            if page.file not in files:
                raise CaptureError(f"{path}: {MANIFEST}: pages[{i}]: file {page.file[:100]!r} is not in the archive")
            page.body = files[page.file]
        pages.append(page)
    if not isinstance(manifest.get("target"), str) or not manifest["target"]:
        raise CaptureError(f"{path}: {MANIFEST}: no target")
    try:
        parse_target(manifest["target"])
    except (TargetError, ValueError) as exc:
        raise CaptureError(f"{path}: {MANIFEST}: target: {exc}") from None
    if not isinstance(manifest.get("discover", False), bool):
        raise CaptureError(f"{path}: {MANIFEST}: discover is not true or false")
    return Capture(manifest, pages, files.get(archive.METRICS, b"").decode("utf-8", "replace"), path)


def comparable(exposition: str) -> list[str]:
    """The sample lines of an exposition that a replay must reproduce: all but the probe's
    duration (HELP and TYPE lines are left out: a reworded HELP is not a misread page)."""
    return archive.comparable(exposition, ("stargate_scrape_duration_seconds ",))
