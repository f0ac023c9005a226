"""``vcenter-exporter capture`` and ``vcenter-exporter replay``: the SOAP answers of one
inventory build and one probe, anonymized, and their replay through the exporter's own code, on
the one capture of ``common/capture.py`` (what is vCenter's own: which calls, how they are named,
what they name).

Capture: a :class:`~.target.Target` of the exporter (the same allow-list, credentials, TLS,
batching) makes one probe, the first of a session: it builds the inventory (paged
RetrievePropertiesEx) and asks QueryPerf for each running VM's latest sample. Every answer of
those calls goes through ``client.post``, which hands it to the capture's recorder (request,
HTTP status, answer, seconds). The session's counter list (key -> ``group.name.rollup``), the
PerformanceManager's moref and maxQueryMetrics are read from the same session and kept in the
manifest. Login and the counter list itself go through pyvmomi and are not kept as XML.

Replay: the same :class:`~.target.Target` code runs against a stand-in service instance whose
``post`` answers each request with the recorded answer to the same request (or, for the
inventory's pages, the next one recorded), so the inventory parse, the QueryPerf parse, the
integration and the exposition are the exporter's own.

The archive (tar, gzip): ``manifest.json`` (exporter, version, when, target, outcome, counters,
settings, and per exchange: method, HTTP status, bytes, seconds, files), ``exchanges/NNNN-<method>
-request.xml`` and ``-answer.xml``, ``metrics.prom`` (the replay's exposition), ``README.txt``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from lxml import etree

from ioparallax.exporters.common import capture as archive
from ioparallax.exporters.common.anonymize import Anonymizer
from ioparallax.exporters.common.capture import MANIFEST, CaptureError
from ioparallax.exporters.vcenter import client
from ioparallax.exporters.vcenter.address import target_key
from ioparallax.exporters.vcenter.cli import Targets
from ioparallax.exporters.vcenter.client import TargetError
from ioparallax.exporters.vcenter.collector import render_probe
from ioparallax.exporters.vcenter.config import PERF_FORMATS, TargetConfig, load_config
from ioparallax.exporters.vcenter.parse import counter_name
from ioparallax.exporters.vcenter.target import Target

#: Lines of the exposition that differ between two probes of the same answers (durations, ages).
VOLATILE = (
    "vcenter_scrape_duration_seconds",
    "vcenter_probe_duration_seconds",
    "vcenter_inventory_age_seconds",
    "vcenter_inventory_build_duration_seconds",
    "vcenter_collection_duration_seconds",
    "vcenter_virtual_disk_sample_age_seconds",
)

_METHOD = re.compile(rb"<(?:[\w-]+:)?Body[^>]*>\s*<(?:[\w-]+:)?(\w+)")


@dataclasses.dataclass(kw_only=True)
class Exchange(archive.Answered):
    """A SOAP call: its method and request body."""

    method: str
    request: bytes

    def manifest(self, n: int) -> dict[str, Any]:
        return {
            "method": self.method,
            **self.answered(),
            "request": f"exchanges/{n:04d}-{self.method}-request.xml",
            "answer": f"exchanges/{n:04d}-{self.method}-answer.xml",
        }

    def files(self, n: int) -> list[tuple[str, bytes]]:
        entry = self.manifest(n)
        return [(entry["request"], self.request), (entry["answer"], self.answer)]


Capture = archive.Capture[Exchange]


class Recorder(archive.Recorder[Exchange]):
    """Installed as ``client.RECORDER`` while a capture runs: keeps every exchange of ``post``."""

    def __call__(self, method: str, request: bytes, status: int, answer: bytes, seconds: float) -> None:
        offset = self.offset(seconds)
        self.keep(
            Exchange(method=method, request=request, status=status, answer=answer, seconds=seconds, offset=offset)
        )


# --------------------------------------------------------------------------------- capturing
def capture(name: str, cfg: TargetConfig, timeout: float = 120.0) -> tuple[Capture, bytes]:
    """One probe of vCenter ``name`` (its first: inventory build and latest samples) as the
    exporter makes it, every SOAP answer kept; (the capture, the probe's exposition)."""
    recorder = Recorder()
    created = datetime.now(UTC)
    with closing(Target(name, cfg)) as target, archive.recording(client, recorder):
        target.watch_inventory_updates(False)  # the paged RetrievePropertiesEx: replayable by any version
        (snap, _), duration = archive.timed(target.probe, timeout)
        counters: dict[str, str] = {}
        if target.keys is not None:
            counters = target.client.call(
                lambda si: {str(c.key): counter_name(c) for c in si.content.perfManager.perfCounter}
            )
    metrics = render_probe(name, snap, duration, False)
    manifest = ARCHIVE.manifest(created, name, snap, duration) | {
        "vms": len(snap.vms),
        "disks": sum(len(vm.disks) for vm in snap.vms),
        "perf_format": cfg.perf_format,
        "perf_manager": target.perf_manager or "",
        "max_query_metrics": target.max_metrics,
        "star_expanded_by_server": snap.star_expanded_by_server,
        "counters": counters,
        "anonymized": False,
    }
    return Capture(manifest, recorder.exchanges), metrics


# ------------------------------------------------------------------------------ anonymizing
_PROPSET = "{urn:vim25}propSet"
_CHANGESET = "{urn:vim25}changeSet"
_NAME = "{urn:vim25}name"
_VAL = "{urn:vim25}val"
_FILE = "{urn:vim25}fileName"
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)
#: Properties whose value names something (a VM, host or datastore name; a guest's host name).
_NAMING_PROPS = frozenset({"name", "summary.config.name", "guest.hostName", "config.name", "summary.name"})


def learn(anon: Anonymizer, answer: bytes) -> None:
    """What an answer names: the ``name`` properties of its objects (VMs, hosts, datastores) and
    the disks' backing files (``[datastore] vm/vm.vmdk``)."""
    try:
        root = etree.fromstring(answer, _XML)
    except etree.XMLSyntaxError:
        return
    files = list(root.iter(_FILE))
    for prop in root.iter(_PROPSET, _CHANGESET):  # RetrievePropertiesEx, WaitForUpdatesEx
        prop_name = (prop.findtext(_NAME) or "").strip()
        if prop_name in _NAMING_PROPS:
            val = prop.find(_VAL)
            if val is not None and val.text:
                anon.name(val.text.strip())
        elif prop_name == "config.files.vmPathName":  # "[datastore] dir/vm.vmx", as a disk's file
            val = prop.find(_VAL)
            text = (val.text or "").strip() if val is not None else ""
            m = re.fullmatch(r"\[([^\]]+)\]\s*(.*)", text)
            if m and "servicevm" in m.group(2).lower():
                # A CVM's: the installer's fixed ServiceVM folder names nobody, and is how the
                # exporter recognises the CVM once its name is anonymized.
                anon.name(m.group(1))
            elif val is not None:
                files.append(val)
    for el in files:
        if el.text:  # "[datastore] dir/file.vmdk": the datastore and the path, each
            m = re.fullmatch(r"\[([^\]]+)\]\s*(.*)", el.text.strip())
            if m:
                anon.name(m.group(1))
                anon.name(m.group(2), "file")
            else:
                anon.name(el.text.strip(), "file")


def anonymize(cap: Capture, redact: Sequence[str] = (), free_text: bool = False) -> Anonymizer:
    """Replace the capture's names, addresses and UUIDs (requests, answers, target) in place,
    consistently (common/anonymize.py): the objects' names and backing files, and the hosts of
    every URL in an answer."""
    anon = Anonymizer(redact, free_text)
    archive.anonymize_target(anon, cap.target)
    for ex in cap.exchanges:
        anon.learn_text(ex.answer)
        learn(anon, ex.answer)
    for ex in cap.exchanges:
        ex.request = anon.bytes(ex.request)
        ex.answer = anon.bytes(ex.answer)
    archive.anonymize_manifest(anon, cap.manifest, cap.target)
    return anon


# -------------------------------------------------------------------------------- replaying
class _Response:
    def __init__(self, status: int, data: bytes) -> None:
        self.status, self._data = status, data
        self.reason = "OK" if status == 200 else "Internal Server Error"
        self.will_close = False

    def read(self) -> bytes:
        return self._data

    def getheader(self, name: str, default: Any = None) -> Any:
        return default


class _Connection:
    def __init__(self, stub: _ReplayStub) -> None:
        self.stub, self.body = stub, b""

    def request(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        self.body = body

    def getresponse(self) -> _Response:
        return self.stub.answer(self.body)

    def close(self) -> None:
        pass


class _ReplayStub:
    """Answers ``client.post`` from a capture: the recorded answer to the same request (in order,
    when it was asked more than once), else the next recorded answer of the same method."""

    path, cookie, versionId = "/sdk", "", "urn:vim25/8.0"

    def __init__(self, cap: Capture) -> None:
        self.cap = cap
        self._answers = archive.Answers(
            cap.exchanges, lambda ex: ex.request, lambda ex: _batch(ex.request), lambda ex: ex.method
        )

    def GetConnection(self) -> _Connection:  # noqa: N802 (pyvmomi's names)
        return _Connection(self)

    def ReturnConnection(self, conn: _Connection) -> None:  # noqa: N802
        pass

    def DropConnections(self) -> None:  # noqa: N802
        pass

    def answer(self, body: bytes) -> _Response:
        """The answer recorded for this request; for the same QueryPerf batch asked from another
        time (a later probe), the batch's answer (its samples are then already integrated);
        else the first answer of the method (the inventory's first page, whose request names a
        view of this session)."""
        m = _METHOD.search(body)
        method = m.group(1).decode() if m else "?"
        ex = self._answers.find(body, _batch(body), method)
        if ex is None:
            raise TargetError(f"{method}: no such request in the capture {self.cap.source}", "protocol")
        return _Response(ex.status, ex.answer)


_SINCE = re.compile(rb"<startTime>[^<]*</startTime>|<maxSample>[0-9]+</maxSample>")


def _batch(request: bytes) -> bytes:
    """A QueryPerf request without what changes from probe to probe (since when)."""
    return _SINCE.sub(b"", request)


def _counter(key: str, name: str) -> SimpleNamespace:
    group, counter, rollup = name.split(".", 2)
    return SimpleNamespace(
        key=int(key), groupInfo=SimpleNamespace(key=group), nameInfo=SimpleNamespace(key=counter), rollupType=rollup
    )


class _ReplayClient:
    """Stands in for VCenterClient: ``call(fn)`` runs ``fn`` on a service instance made of the
    capture (its counters, morefs and settings, and a stub answering from its exchanges)."""

    logins = 1

    def __init__(self, cap: Capture) -> None:
        m = cap.manifest
        view = SimpleNamespace(_moId="session[replay]view", Destroy=lambda: None)
        self.si = SimpleNamespace(
            _stub=_ReplayStub(cap),
            content=SimpleNamespace(
                perfManager=SimpleNamespace(
                    perfCounter=[_counter(k, n) for k, n in (m.get("counters") or {}).items()],
                    _moId=m.get("perf_manager") or "PerfMgr",
                ),
                setting=SimpleNamespace(
                    QueryOptions=lambda name: [SimpleNamespace(value=m.get("max_query_metrics") or 256)]
                ),
                viewManager=SimpleNamespace(CreateContainerView=lambda *a: view),
                propertyCollector=SimpleNamespace(_moId="propertyCollector"),
                rootFolder=None,
            ),
        )

    def call(self, fn: Any) -> Any:
        return fn(self.si)

    def close(self) -> None:
        pass


def replay(cap: Capture, timeout: float = 60.0, latest_samples: bool = True) -> bytes:
    """The exposition of one probe answered from the capture, by the exporter's own Target."""
    cfg = _settings(cap)
    factory = lambda name, c: _ReplayClient(cap)  # noqa: E731
    with closing(Target(cap.target, cfg, client_factory=factory)) as target:  # type: ignore[arg-type]
        target.watch_inventory_updates(False)  # captures hold RetrievePropertiesEx pages
        (snap, _), duration = archive.timed(target.probe, timeout)
        return render_probe(cap.target, snap, duration, False, latest_samples)


def replay_setup(path: str, latest_samples: bool | None = None) -> tuple[Any, Any]:
    """``vcenter-exporter --replay``: (the exporter's config, with the capture's target as the
    only target; the client factory answering from the capture)."""
    from ioparallax.exporters.vcenter.config import ExporterConfig

    cap = read(path)  # its target and settings checked
    cfg = _settings(cap)
    config = ExporterConfig(
        defaults=cfg,
        targets={target_key(cap.target): cfg},
        path=path,
        latest_samples=True if latest_samples is None else latest_samples,
    )
    return config, lambda name, c: _ReplayClient(cap)


# ------------------------------------------------------------------------------ the archive
def _exchange(e: dict[str, Any], files: dict[str, bytes]) -> Exchange:
    request = archive.member(files, archive.field_str(e, "request"))
    answer = archive.member(files, archive.field_str(e, "answer"))
    return Exchange(method=archive.field_str(e, "method"), request=request, **archive.Answered.answered_of(e, answer))


#: The README.txt of a capture.
README = """\
A capture of the SOAP answers one vcenter-exporter probe read: the inventory
(RetrievePropertiesEx pages) and the latest samples (QueryPerf){anonymized}.

manifest.json   the exporter's version, the target, the outcome, the counter list, and per
                exchange: method, HTTP status, bytes, seconds, files
exchanges/      each request and its answer
metrics.prom    the metrics the exporter makes of these answers (a replay of them)

Replay it:   vcenter-exporter replay {name}
"""
ARCHIVE = archive.Archive(exporter="vcenter", readme=README, exchange=_exchange, volatile=VOLATILE)
write = ARCHIVE.write
comparable = ARCHIVE.comparable


_COUNTER_KEY = re.compile(r"[0-9]{1,9}")
_COUNTER_NAME = re.compile(r"[^.]{1,200}\.[^.]{1,200}\..{1,200}")  # group.name.rollup: split at the first two dots


def _settings(cap: Capture) -> TargetConfig:
    """The probe's settings from the manifest, checked as the config file's are (ValueError)."""
    m = cap.manifest
    fmt = archive.field_str(m, "perf_format", "csv") or "csv"
    if fmt not in PERF_FORMATS:
        raise ValueError(f"perf_format: {fmt[:40]!r} is not one of {', '.join(PERF_FORMATS)}")
    # A capture made before the exporter read CPU holds no CPU query: its replay does not ask one.
    cpu = any(ex.method == "QueryPerf" and b"<instance></instance>" in ex.request for ex in cap.exchanges)
    return TargetConfig(
        perf_format=fmt, max_query_metrics=archive.field_int(m, "max_query_metrics", None, 1, 10**9), cpu=cpu
    )


def read(path: str) -> Capture:
    """A capture read back, every field the replay uses checked: CaptureError names the file and the cause."""
    cap = ARCHIVE.read(path)
    m = cap.manifest
    try:
        _settings(cap)
        archive.field_str(m, "perf_manager")
        for key, name in archive.field_dict(m, "counters").items():
            if not _COUNTER_KEY.fullmatch(key) or not isinstance(name, str) or not _COUNTER_NAME.fullmatch(name):
                raise ValueError(f"counters: {key[:20]!r}: not a counter key and group.name.rollup")
        target_key(cap.target)
    except ValueError as exc:
        raise CaptureError(f"{path}: {MANIFEST}: {exc}") from None
    return cap


# ------------------------------------------------------------------------------ the commands
COMMANDS = archive.Commands(
    exporter="vcenter",
    what="vCenter",
    description=(
        "One probe of a vCenter as the exporter makes it (the first of a session: the inventory "
        "and each running VM's latest samples), its SOAP answers written to a .tar.gz with a manifest and the "
        "metrics they give. Names, addresses and UUIDs are anonymized by default (docs/vcenter.md, Captures)."
    ),
    answers="SOAP answers",
    archive=ARCHIVE,
    load_config=load_config,
    targets=Targets,
    capture=lambda key, cfg, config, args: capture(key, cfg, args.timeout)[0],
    anonymize=anonymize,
    replay=replay,
    read=read,
)
capture_main = COMMANDS.capture_main
replay_main = COMMANDS.replay_main
