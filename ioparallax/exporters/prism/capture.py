"""``prism-exporter capture`` and ``prism-exporter replay``: the JSON answers of one probe,
anonymized, and their replay through the exporter's own code, on the one capture of
``common/capture.py`` (what is Prism's own: which answers, how they are named, what they name).

Capture: a :class:`~.target.Target` of the exporter (the same allow-list, credentials, TLS,
page size, deadline) makes one probe, the first of a session: every page of ``virtual_disks``,
the VM list and the hosts (unless ``vm_info`` is off), and with ``controller_api: v4`` each
disk's v4 series. Every answer goes through :meth:`ioparallax.exporters.common.prismclient.PrismClient.get`, which hands it to
the capture's recorder (path, parameters, HTTP status, body, Content-Type, Date, seconds). The
sample keeper is off for the capture: only the probe's own requests are kept.

Replay: the same :class:`~.target.Target` code runs against a stand-in client whose ``get``
answers each request with the recorded answer to the same request (path and parameters; a v4
request, whose time range moves, gets the recorded answer of the same path), through
:func:`.client.answer_of` as a live answer, so paging, parsing (Date included), integration and
exposition are the exporter's own.

The archive (tar, gzip): ``manifest.json`` (exporter, version, when, target, outcome, settings,
and per exchange: path, parameters, HTTP status, Content-Type, Date, bytes, seconds, file),
``answers/NNNN-<what>.json``, ``metrics.prom`` (the replay's exposition), ``README.txt``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime
from typing import Any

from ioparallax.exporters.common import capture as archive, prismclient as client_module
from ioparallax.exporters.common.anonymize import Anonymizer
from ioparallax.exporters.common.capture import MANIFEST, CaptureError
from ioparallax.exporters.common.prismclient import Answer, TargetError, answer_of
from ioparallax.exporters.prism.cli import Targets
from ioparallax.exporters.prism.collector import render_probe
from ioparallax.exporters.prism.config import Collectors, ExporterConfig, TargetConfig, load_config
from ioparallax.exporters.prism.target import V2, Target

#: Lines of the exposition that differ between two probes of the same answers (durations, ages).
VOLATILE = ("prism_scrape_duration_seconds", "prism_virtual_disk_sample_age_seconds")


def _what(path: str) -> str:
    """A short name of what a path asks for: virtual_disks, vms, hosts, v4-disk-stats."""
    if path.startswith(V2):
        return path[len(V2) :].strip("/").split("/", 1)[0] or "v2"
    return "v4-disk-stats" if "/stats/" in path else "answer"


@dataclasses.dataclass(kw_only=True)
class Exchange(archive.Answered):
    """A GET: its path and parameters, and the answer's Content-Type and Date header."""

    path: str
    params: dict[str, str]
    content_type: str
    date: str

    def manifest(self, n: int) -> dict[str, Any]:
        return {
            "path": self.path,
            "params": self.params,
            "content_type": self.content_type,
            "date": self.date,
            **self.answered(),
            "answer": self.member(n),
        }

    def member(self, n: int) -> str:
        """``answers/NNNN-<what>[-pageN].json``."""
        page = f"-page{self.params['page']}" if "page" in self.params else ""
        return f"answers/{n:04d}-{_what(self.path)}{page}.json"

    def files(self, n: int) -> list[tuple[str, bytes]]:
        return [(self.member(n), self.answer)]


Capture = archive.Capture[Exchange]


class Recorder(archive.Recorder[Exchange]):
    """Installed as ``client.RECORDER`` while a capture runs: keeps every answer of ``get``."""

    def __call__(
        self, path: str, params: dict[str, Any], status: int, body: bytes, ctype: str, date: str, seconds: float
    ) -> None:
        params = {k: str(v) for k, v in params.items()}
        offset = self.offset(seconds)
        self.keep(
            Exchange(
                path=path,
                params=params,
                content_type=ctype,
                date=date,
                status=status,
                answer=body,
                seconds=seconds,
                offset=offset,
            )
        )


# --------------------------------------------------------------------------------- capturing
def capture(
    name: str, cfg: TargetConfig, collectors: Collectors | None = None, timeout: float = 120.0
) -> tuple[Capture, bytes]:
    """One probe of Prism ``name`` (its first) as the exporter makes it, every answer kept;
    (the capture, the probe's exposition)."""
    collectors = collectors or Collectors()
    cfg = dataclasses.replace(cfg, v2_sample_keeper=False)  # the probe's requests only
    recorder = Recorder()
    created = datetime.now(UTC)
    with closing(Target(name, cfg, vm_info=collectors.vm_info)) as target, archive.recording(client_module, recorder):
        snap, duration = archive.timed(target.probe, timeout)
    metrics = render_probe(name, snap, duration, collectors)
    manifest = ARCHIVE.manifest(created, name, snap, duration) | {
        "disks": len(snap.disks),
        "vms": len(snap.vms),
        "logins": snap.logins,
        "settings": {
            "page_size": cfg.page_size,
            "v2_sample_delay": cfg.v2_sample_delay,
            "controller_api": cfg.controller_api,
            "cpu": cfg.cpu,
        },
        "collectors": dataclasses.asdict(collectors),
        "anonymized": False,
    }
    return Capture(manifest, list(recorder.exchanges)), metrics


# ------------------------------------------------------------------------------ anonymizing
#: Keys whose string value names something, anywhere in an answer, and the placeholder's prefix.
NAME_KEYS = {
    "attached_vmname": "vm",
    "vm_name": "vm",
    "cluster_name": "cluster",
    "container_name": "container",
    "storage_container_name": "container",
    "hypervisor_hostname": "host",
    "host_name": "host",
    "vdisk_name": "vdisk",
    "description": "text",
    # The hosts answer holds the hardware's identity too (the exporter reads only uuid and name).
    "management_server_name": "host",
    "serial": "serial",
    "block_serial": "serial",
    "node_serial": "serial",
    "serial_number": "serial",
    "rackable_unit_serial": "serial",
}
#: Keys whose value is an NFS path (``/<container>/<dir>/<file>``).
PATH_KEYS = frozenset({"nutanix_nfsfile_path", "nutanix_nfs_file_path", "ndfs_filepath", "nfs_file_path"})
#: The ``name`` of an entity of these lists is a name of this kind.
ENTITY_NAMES = {"vms": "vm", "hosts": "host", "virtual_disks": "name"}


#: NFS path components that name no user object (AHV's ``/<container>/.acropolis/vmdisk/<uuid>``).
STRUCTURAL = frozenset({".acropolis", "vmdisk", ".snapshot"})


def learn_path(anon: Anonymizer, path: str) -> None:
    """An NFS path component by component: the container (``container-N``, the same on every
    disk of the container, so the ``container`` label still groups them), then the directory and
    file names (``file-N``; a VM's directory named as the VM gets the VM's placeholder). UUIDs
    in it are left to the UUID rule."""
    parts = [p for p in path.strip("/").split("/") if p]
    if parts:
        anon.name(parts[0], "container")
    for part in parts[1:]:
        if part not in STRUCTURAL:
            anon.name(part, "file")


def learn(anon: Anonymizer, doc: Any, what: str, paths: bool = False) -> None:
    """What an answer names: VM, host, container, cluster names and the ``name`` of each VM and
    host entity; with ``paths``, the NFS paths' components (learnt after every name, so that a
    VM's directory gets the VM's placeholder)."""

    def walk(node: Any, depth: int) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str) and value:
                    if paths:
                        if key in PATH_KEYS and value.startswith("/"):
                            learn_path(anon, value)
                    elif key in NAME_KEYS:
                        anon.name(value, NAME_KEYS[key])
                    elif key == "name" and depth <= 2:
                        anon.name(value, ENTITY_NAMES.get(what, "name"))
                else:
                    walk(value, depth + 1)
        elif isinstance(node, list):
            for item in node:
                walk(item, depth + 1)

    walk(doc, 0)


def anonymize(cap: Capture, redact: Sequence[str] = (), free_text: bool = False) -> Anonymizer:
    """Replace the capture's names, addresses and UUIDs (answers, paths, parameters, target) in
    place, consistently (common/anonymize.py): the names of the answers' naming keys, the NFS
    paths' components, and the hosts of every URL in an answer."""
    anon = Anonymizer(redact, free_text)
    archive.anonymize_target(anon, cap.target)
    docs = []
    for ex in cap.exchanges:
        anon.learn_text(ex.answer)
        try:
            docs.append((json.loads(ex.answer), _what(ex.path)))
        except ValueError:
            continue  # not JSON: UUIDs and addresses are still replaced
    for paths in (False, True):
        for doc, what in docs:
            learn(anon, doc, what, paths)
    for ex in cap.exchanges:
        ex.path = anon.text(ex.path)
        ex.params = {k: anon.text(v) for k, v in ex.params.items()}
        ex.answer = anon.bytes(ex.answer)
    archive.anonymize_manifest(anon, cap.manifest, cap.target)
    return anon


# -------------------------------------------------------------------------------- replaying
def _key(path: str, params: dict[str, Any] | None) -> str:
    return path + "?" + json.dumps({k: str(v) for k, v in (params or {}).items()}, sort_keys=True)


class ReplayClient:
    """Stands in for PrismClient: ``get`` answers from a capture (the same request's answer, else
    the first answer recorded for the same path)."""

    def __init__(self, cap: Capture) -> None:
        self.cap = cap
        self.logins = archive.field_int(cap.manifest, "logins")  # checked by read()
        self._answers = archive.Answers(cap.exchanges, lambda ex: _key(ex.path, ex.params), lambda ex: ex.path)

    def get(self, path: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> Answer:
        ex = self._answers.find(_key(path, params), path)
        if ex is None:
            raise TargetError(f"{path}: no such request in the capture {self.cap.source}", "protocol")
        return answer_of(path, ex.status, ex.answer, ex.content_type, ex.date)

    def close(self) -> None:
        pass


def _flag(entry: dict[str, Any], key: str, default: bool) -> bool:
    value = entry.get(key, default)
    if not isinstance(value, bool):
        raise ValueError(f"{key}: not true or false")
    return value


def _settings(cap: Capture) -> tuple[TargetConfig, Collectors]:
    """The probe's settings and collectors from the manifest, each checked as the config file's are."""
    m = cap.manifest
    try:
        s, c = archive.field_dict(m, "settings"), archive.field_dict(m, "collectors")
    except ValueError as exc:
        raise CaptureError(f"{cap.source}: {MANIFEST}: {exc}") from None
    try:
        api = archive.field_str(s, "controller_api", "v2")
        if api not in ("v2", "v4"):
            raise ValueError(f"controller_api: {api[:40]!r} is not v2 or v4")
        cfg = TargetConfig(
            page_size=archive.field_int(s, "page_size", TargetConfig.page_size, 1, 10000),
            v2_sample_delay=archive.field_float(s, "v2_sample_delay", TargetConfig.v2_sample_delay, 25.0),
            controller_api=api,
            v2_sample_keeper=False,
            # A capture made before the exporter read CPU says nothing of it: it holds no CPU
            # answers to replay, so its replay reads none (its metrics have no CPU series).
            cpu=_flag(s, "cpu", False),
        )
    except ValueError as exc:
        raise CaptureError(f"{cap.source}: {MANIFEST}: settings.{exc}") from None
    known = {k: v for k, v in c.items() if k in Collectors.__dataclass_fields__}
    for k, v in known.items():
        if not isinstance(v, bool):
            raise CaptureError(f"{cap.source}: {MANIFEST}: collectors.{k}: not true or false")
    return cfg, Collectors(**known)


def replay(cap: Capture, timeout: float = 60.0) -> bytes:
    """The exposition of one probe answered from the capture, by the exporter's own Target."""
    cfg, collectors = _settings(cap)
    factory = lambda name, c: ReplayClient(cap)  # noqa: E731
    with closing(Target(cap.target, cfg, vm_info=collectors.vm_info, client_factory=factory)) as target:
        snap, duration = archive.timed(target.probe, timeout)
        return render_probe(cap.target, snap, duration, collectors)


def replay_setup(path: str) -> tuple[ExporterConfig, Any]:
    """``prism-exporter --replay``: (the exporter's config, with the capture's target as the only
    target; the client factory answering from the capture)."""
    from ioparallax.exporters.prism.address import target_key

    cap = read(path)
    cfg, collectors = _settings(cap)
    try:
        key = target_key(cap.target)
    except ValueError as exc:
        raise CaptureError(f"{path}: {MANIFEST}: target: {exc}") from None
    config = ExporterConfig(defaults=cfg, targets={key: cfg}, path=path, collectors=collectors)
    return config, lambda name, c: ReplayClient(cap)


# ------------------------------------------------------------------------------ the archive
def _exchange(e: dict[str, Any], files: dict[str, bytes]) -> Exchange:
    params = archive.field_dict(e, "params")
    return Exchange(
        path=archive.field_str(e, "path"),
        params={str(k): str(v) for k, v in params.items()},
        content_type=archive.field_str(e, "content_type"),
        date=archive.field_str(e, "date"),
        **archive.Answered.answered_of(e, archive.member(files, archive.field_str(e, "answer"))),
    )


#: The README.txt of a capture.
README = """\
A capture of the JSON answers one prism-exporter probe read: every page of virtual_disks, the
VM list and hosts, and with controller_api v4 each disk's v4 series{anonymized}.

manifest.json   the exporter's version, the target, the outcome, the settings, and per answer:
                path, parameters, HTTP status, Date, bytes, seconds, file
answers/        each answer as Prism sent it
metrics.prom    the metrics the exporter makes of these answers (a replay of them)

Replay it:   prism-exporter replay {name}
"""
ARCHIVE = archive.Archive(exporter="prism", readme=README, exchange=_exchange, volatile=VOLATILE)
write = ARCHIVE.write
comparable = ARCHIVE.comparable


def read(path: str) -> Capture:
    """A capture read back, every field the replay uses checked: CaptureError names the file and the cause."""
    cap = ARCHIVE.read(path)
    try:
        archive.field_int(cap.manifest, "logins")
    except ValueError as exc:
        raise CaptureError(f"{path}: {MANIFEST}: {exc}") from None
    _settings(cap)
    return cap


# ------------------------------------------------------------------------------ the commands
COMMANDS = archive.Commands(
    exporter="prism",
    what="Prism",
    description=(
        "One probe of a Prism as the exporter makes it (the first of a session: every virtual_disks "
        "page, the VM list and hosts, and the v4 series with controller_api v4), its JSON answers written to a "
        ".tar.gz with a manifest and the metrics they give. Names, addresses and UUIDs are anonymized by "
        "default (docs/prism.md, Captures)."
    ),
    answers="answers",
    archive=ARCHIVE,
    load_config=load_config,
    targets=Targets,
    capture=lambda key, cfg, config, args: capture(key, cfg, config.collectors, args.timeout)[0],
    anonymize=anonymize,
    replay=replay,
    read=read,
)
capture_main = COMMANDS.capture_main
replay_main = COMMANDS.replay_main
