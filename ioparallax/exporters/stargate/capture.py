"""Captures of what one probe fetched, anonymized, and their replay, on the one capture of
``common/capture.py`` (what is Stargate's own: the pages as exchanges, how they are named and what
they name, the allow-list and ``--discover`` of its commands).

``stargate-exporter capture --target <cvm> -o capture.tar.gz`` runs one probe, exactly as the
exporter runs it (target.py with the exporter's own :class:`~.client.HttpClient`: the same
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

import argparse
import logging
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import lxml.etree

from ioparallax.exporters.common import capture as archive
from ioparallax.exporters.common.anonymize import Anonymizer
from ioparallax.exporters.common.capture import MANIFEST, CaptureError
from ioparallax.exporters.stargate.address import Origin, TargetError, TargetPolicy, parse_target
from ioparallax.exporters.stargate.client import Budget, DeadlineExceeded, FetchError, HttpClient, Limits
from ioparallax.exporters.stargate.collector import Collectors, StargateCollector
from ioparallax.exporters.stargate.config import env_targets, load_config
from ioparallax.exporters.stargate.parse import _cells, _header_keys, _rows, _text
from ioparallax.exporters.stargate.target import DEFAULT_CONCURRENCY, ProbeResult, probe

log = logging.getLogger(__name__)

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

    def manifest(self, n: int = 0) -> dict[str, Any]:
        """Its manifest entry (the file was named when the page was captured)."""
        return {
            "url": self.url,
            "kind": self.kind,
            "status": self.status,
            "bytes": self.size,
            **archive.timing(self.seconds, self.offset),
            "build": self.build,
            "error": self.error,
            "file": self.file,
        }

    def files(self, n: int = 0) -> list[tuple[str, bytes]]:
        return [(self.file, self.body)] if self.body is not None and self.file else []


@dataclass
class Capture(archive.Capture[CapturedPage]):
    """A capture (common/capture.py) whose exchanges are the pages one probe fetched."""

    _by_url: archive.Answers[CapturedPage] | None = field(default=None, repr=False)
    unknown: int = 0  # fields the capturing probe's pages hold that the parser does not read (not written)

    @property
    def pages(self) -> list[CapturedPage]:
        return self.exchanges

    @property
    def discover(self) -> bool:
        return bool(self.manifest.get("discover", False))

    def page(self, url: str) -> CapturedPage | None:
        if self._by_url is None:
            self._by_url = archive.Answers(self.pages, lambda p: p.url)
        return self._by_url.find(url)

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
        page = CapturedPage(origin.page_url(path))
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
            url = origin.page_url(path)
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
    archive.anonymize_manifest(anon, capture.manifest, capture.target)
    capture._by_url = None
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
    outcome = SimpleNamespace(up=result.up, kind="", cause=result.error)  # Stargate's errors have no kind
    manifest = ARCHIVE.manifest(created, target, outcome, result.duration) | {
        "discover": discover,
        "deadline_seconds": timeout,
        "concurrency": concurrency,
        "body_size_limit": limits.body_size_limit,
        "max_pages_per_probe": limits.max_pages,
        "vdisks": len(result.vdisks),
        "anonymized": False,
    }
    return Capture(manifest, recorder.pages), result


def _origin_of(url: str) -> str:
    parts = url.split("/", 3)
    return "/".join(parts[:3])


def _page(entry: dict[str, Any], files: dict[str, bytes]) -> CapturedPage:
    seconds, offset = archive.timing_of(entry, None)
    page = CapturedPage(
        url=archive.field_str(entry, "url", ""),
        seconds=seconds,
        offset=offset,
        kind=archive.field_str(entry, "kind", "detail"),
        status=archive.field_int(entry, "status", None, 100, 999),
        size=archive.field_int(entry, "bytes"),
        error=archive.field_str(entry, "error"),
        build=archive.field_str(entry, "build"),
        file=archive.field_str(entry, "file"),
    )
    if not page.url:
        raise ValueError("no url")
    if page.file:
        page.body = archive.member(files, page.file)
    return page


#: The README.txt of a capture.
README = """\
A capture of what stargate-exporter fetched in one probe.

manifest.json   the exporter's version, the target, the probe's settings and outcome, and per
                page: URL, kind, HTTP status, bytes, seconds, page build, error, file
pages/          the pages as fetched{anonymized}
metrics.prom    the metrics the exporter makes of these pages (a replay of them)

Look at it:   tar -xzf {name} && less manifest.json
Replay it:    stargate-exporter replay {name}              (prints the metrics)
              stargate-exporter --replay {name}            (serves /probe?target={target})
"""
ARCHIVE = archive.Archive(
    exporter="stargate",
    readme=README,
    exchange=_page,
    volatile=("stargate_scrape_duration_seconds ",),
    key="pages",
)


write = ARCHIVE.write


def read(path: str) -> Capture:
    """A capture read back (nothing extracted to disk). CaptureError names the file and the cause."""
    base = ARCHIVE.read(path)
    cap = Capture(base.manifest, base.exchanges, base.metrics, base.source)
    try:
        parse_target(cap.target)
    except (TargetError, ValueError) as exc:
        raise CaptureError(f"{path}: {MANIFEST}: target: {exc}") from None
    if not isinstance(cap.manifest.get("discover", False), bool):
        raise CaptureError(f"{path}: {MANIFEST}: discover is not true or false")
    return cap


def comparable(exposition: str) -> list[str]:
    """The sample lines of an exposition that a replay must reproduce: all but the probe's
    duration (HELP and TYPE lines are left out: a reworded HELP is not a misread page)."""
    return ARCHIVE.comparable(exposition)


# ------------------------------------------------------------------------------ the commands
@dataclass(frozen=True)
class _Commands(archive.Commands):
    """The common ``capture``/``replay`` commands with Stargate's own steps: the allow-list of
    patterns (no credentials: ``--target`` is checked against it, or alone when there is none),
    ``--discover`` and ``--stargate.concurrency``, the probe's limits from the config file, and
    the pages counted in the summary."""

    def add_capture_args(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument(
            "--discover", action="store_true", help="probe every CVM of the target's Cluster State table too"
        )
        ap.add_argument(
            "--stargate.target",
            dest="targets",
            action="append",
            default=[],
            metavar="PATTERN",
            help="allow-list entries, as for the exporter (also STARGATE_TARGETS). With no allow-list at all, "
            "only --target's host is fetched from",
        )
        ap.add_argument(
            "--stargate.concurrency",
            dest="concurrency",
            type=int,
            default=DEFAULT_CONCURRENCY,
            help="pages requested at once (default: %(default)s, the exporter's)",
        )

    def resolve(self, args: argparse.Namespace) -> tuple[str, Any, Any]:
        config = load_config(args.config_file)
        try:
            host = parse_target(args.target).origin.host
        except TargetError as exc:
            raise ValueError(f"--target {args.target!r}: {exc}") from None
        if args.concurrency < 1 or not 0 < args.timeout <= 600:
            raise ValueError("--stargate.concurrency must be at least 1 and --timeout 0-600 s")
        entries = config.targets + env_targets() + args.targets
        try:
            policy = (
                TargetPolicy(entries, allow_any=config.allow_unlisted)
                if entries or config.allow_unlisted
                else TargetPolicy([host])
            )
        except ValueError as exc:
            raise ValueError(f"allow-list: {exc}") from None
        if not policy.allows(host):
            raise ValueError(f"target {args.target} is not on the targets allow-list ({policy.describe()})")
        return args.target, policy, config

    def replay_captured(self, cap: Any, config: Any, args: argparse.Namespace) -> bytes:
        return replay(cap, limits=config.limits, concurrency=args.concurrency, timeout=max(args.timeout, 30.0))[1]

    def print_written(self, output: str, size: int, cap: Any, summary: str) -> None:
        mains = sum(1 for p in cap.pages if p.kind == "main")
        failed = sum(1 for p in cap.pages if p.body is None)
        print(
            f"wrote {output} ({size / 1e6:.1f} MB): {len(cap.pages)} pages ({mains} main, "
            f"{len(cap.pages) - mains} vdisk detail views, {failed} failed), probe "
            f"{'up' if cap.manifest['up'] else 'DOWN: ' + str(cap.manifest.get('error', ''))}, {summary}"
        )
        if cap.unknown:
            print(
                f"  the pages hold {cap.unknown} fields ioparallax does not read: "
                "this capture is what we need to read them"
            )
        archive.print_check(output)

    def add_replay_args(self, ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--no-collector.histograms", dest="histograms", action="store_false")
        ap.add_argument("--no-collector.source-ratios", dest="source_ratios", action="store_false")

    def replay_capture(self, cap: Any, args: argparse.Namespace) -> bytes:
        return replay(cap, Collectors(args.histograms, args.source_ratios))[1]


def _capture(target: str, policy: TargetPolicy, config: Any, args: argparse.Namespace) -> Capture:
    cap, result = capture(
        target,
        timeout=args.timeout,
        discover=args.discover,
        concurrency=args.concurrency,
        limits=config.limits,
        policy=policy,
        discovery_ports=config.discovery_ports,
    )
    cap.unknown = len(result.unknown)
    return cap


COMMANDS = _Commands(
    exporter="stargate",
    what="CVM",
    description="""\
One probe of a CVM, exactly as the exporter runs it (the same allow-list, body_size_limit,
max_pages_per_probe and deadline; the vdisk detail views its main page links), written to a
.tar.gz with a manifest (exporter version, each page's URL, HTTP status, bytes, seconds and page
build) and the metrics the exporter makes of it. Names, addresses and UUIDs are anonymized by
default (docs/stargate.md, Captures): send the file with your report.
""",
    epilog="""\
examples:
  stargate-exporter capture --target 10.0.0.11 -o capture.tar.gz
  stargate-exporter capture --target 10.0.0.11 --config.file stargate.yml --redact acme --redact acme.example.com
  stargate-exporter replay capture.tar.gz        # the metrics, as /probe would answer them
Check what you send: tar -xzf capture.tar.gz && grep -ril <your cluster or company name> .
""",
    replay_description="Print the metrics of one probe answered from a capture (as /probe answers; no vdisk "
    "names from YAML or Prism). With --check, compare them with the capture's own metrics.prom "
    "(or FILE) instead, all but stargate_scrape_duration_seconds.",
    answers="pages",
    archive=ARCHIVE,
    capture=_capture,
    anonymize=anonymize,
    replay=lambda cap, timeout: replay(cap, timeout=timeout)[1],
    read=read,
    timeout=10.0,
)
capture_main = COMMANDS.capture_main
replay_main = COMMANDS.replay_main
