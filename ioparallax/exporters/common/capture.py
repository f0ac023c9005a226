"""The one capture of the network exporters (Stargate, vCenter, Prism): recording a probe's
answers (:class:`Recorder`), the archive (:class:`Archive`: the ``.tar.gz``, its manifest and
members, read back within bounds), the anonymizer's calls on the target and manifest, the replay's
lookup of recorded answers (:class:`Answers`) and comparison, and the ``capture`` / ``replay``
commands (:class:`Commands`: arguments, steps and output).

Each exporter keeps what is its own: the exchanges it records (Stargate's pages, vCenter's SOAP
requests and answers, Prism's JSON answers with their parameters) and how each is named in the
archive, what it learns for anonymization, and the stand-in client of its replay. Errors name the
archive and the cause (:class:`CaptureError`), never a traceback.
"""

from __future__ import annotations

import argparse
import errno
import io
import json
import os
import sys
import tarfile
import threading
import time
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from ioparallax.exporters.common.anonymize import Anonymizer
from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.exporters.common.watchdir import open_regular
from ioparallax.exporters.common.web.app import BadRequest
from ioparallax.version import revision, version
from ioparallax.yamlconf import ConfigError

MANIFEST = "manifest.json"
METRICS = "metrics.prom"
#: A capture read back is held in memory: more than this (uncompressed) or this many members is refused.
MAX_CAPTURE_BYTES = 256 * 1024 * 1024
MAX_MEMBERS = 100_000


class CaptureError(Exception):
    """A capture that cannot be written or read; the message names the file and the cause."""


class Exchange(Protocol):
    """What an exporter records of one request and its answer, as the archive holds it."""

    def manifest(self, n: int) -> dict[str, Any]:
        """The manifest's entry of the ``n``-th exchange (naming its files)."""
        ...

    def files(self, n: int) -> list[tuple[str, bytes]]:
        """The archive's members of the ``n``-th exchange: (name, bytes)."""
        ...


E = TypeVar("E")
X = TypeVar("X", bound=Exchange)


@dataclass
class Answered:
    """The answer of an exchange as the API exporters' captures keep it, beside their own record
    of the request: the HTTP status, the body, the seconds from the request to the answer and
    when it was sent (``offset``: seconds after the capture started)."""

    status: int
    answer: bytes
    seconds: float
    offset: float

    def answered(self) -> dict[str, Any]:
        """Its manifest entry's status, size and :func:`timing`."""
        return {"status": self.status, "bytes": len(self.answer), **timing(self.seconds, self.offset)}

    @staticmethod
    def answered_of(entry: dict[str, Any], answer: bytes) -> dict[str, Any]:
        """The fields of an entry written by :meth:`answered` (and the ``answer`` read from its
        file), checked; ValueError."""
        seconds, offset = timing_of(entry)
        return {"status": status_of(entry), "answer": answer, "seconds": seconds, "offset": offset}


@dataclass
class Capture(Generic[E]):
    """A capture in memory: its manifest, the exchanges (each exporter's own record of a request
    and its answer) and, read back, the metrics the capture was written with."""

    manifest: dict[str, Any]
    exchanges: list[E]
    metrics: str = ""
    source: str = "capture"

    @property
    def target(self) -> str:
        return str(self.manifest.get("target", ""))


@dataclass
class Recorder(Generic[E]):
    """Keeps the exchanges of a capture's probe, from any thread; an exporter's recorder is
    called by its client with what it sent and got, and :meth:`keep` s it."""

    exchanges: list[E] = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def offset(self, seconds: float) -> float:
        """When a request that took ``seconds`` and just ended was sent, in seconds from the start."""
        return time.monotonic() - seconds - self.start

    def keep(self, exchange: E) -> None:
        with self._lock:
            self.exchanges.append(exchange)


@contextmanager
def recording(client_module: Any, recorder: Recorder[Any]) -> Iterator[Recorder[Any]]:
    """``client_module.RECORDER`` is ``recorder`` while the block runs (a capture's probe): the
    exporter's client hands it every answer; None again after, whatever happens (enter it after
    the target is made and leave it before the target is closed: a logout is not the probe's)."""
    client_module.RECORDER = recorder
    try:
        yield recorder
    finally:
        client_module.RECORDER = None


T = TypeVar("T")


def timed(probe: Callable[[float], T], timeout: float) -> tuple[T, float]:
    """(``probe(timeout)``, the seconds it took)."""
    start = time.monotonic()
    result = probe(timeout)
    return result, time.monotonic() - start


def write_archive(
    path: str,
    manifest: dict[str, Any],
    readme: str,
    metrics: bytes,
    files: Sequence[tuple[str, bytes]],
    **fields: str,
) -> int:
    """Write ``manifest.json``, ``README.txt`` (``readme`` with ``{anonymized}``, ``{name}`` and
    the other ``fields`` filled in), ``metrics.prom`` and ``files`` to the ``.tar.gz`` at ``path``;
    its size in bytes."""
    anonymized = ", anonymized (manifest.json: anonymization)" if manifest.get("anonymized") else ", NOT anonymized"
    members: list[tuple[str, bytes]] = [
        (MANIFEST, json.dumps(manifest, indent=1).encode()),
        ("README.txt", readme.format(anonymized=anonymized, name=path.rsplit("/", 1)[-1], **fields).encode()),
        (METRICS, metrics),
        *files,
    ]
    now = int(time.time())
    try:
        with tarfile.open(path, "w:gz") as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), now, 0o644
                tar.addfile(info, io.BytesIO(data))
        with open(path, "rb") as f:
            return f.seek(0, io.SEEK_END)
    except OSError as exc:
        raise CaptureError(f"{path}: cannot write: {exc.strerror or exc}") from None


class _BoundedTarInfo(tarfile.TarInfo):
    """A member header whose extended headers (GNU long name/link, PAX) are counted before
    ``tarfile`` reads them: it reads each one whole into memory, so a 2.7 MB archive whose
    long-name header claimed 600 MB took 1.2 GB before any member was looked at. Each is held to
    :data:`MAX_HEADER_BYTES`, counted against :data:`MAX_CAPTURE_BYTES` with the members, and at
    most :data:`MAX_HEADER_CHAIN` of them may precede one member (tarfile reads a chain by
    recursion)."""

    def _proc_member(self, tarfile: Any) -> Any:
        if self.type in _EXTENDED:
            bounded = tarfile if isinstance(tarfile, _BoundedTar) else None
            if bounded is not None:
                bounded.extended(self)
        return super()._proc_member(tarfile)  # type: ignore[misc]


_EXTENDED = frozenset(
    {tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE}
)
#: Largest extended header (a long name or a PAX record set; GNU tar writes a few hundred bytes).
MAX_HEADER_BYTES = 64 * 1024
#: Most extended headers before one member (GNU tar writes at most a global PAX header, a PAX
#: header, a long name and a long link).
MAX_HEADER_CHAIN = 8


class _BoundedTar(tarfile.TarFile):
    """A tar read with every byte its headers and members claim counted (see :class:`_BoundedTarInfo`)."""

    tarinfo = _BoundedTarInfo
    members: list[tarfile.TarInfo]  # tarfile's own list, kept empty here (not in typeshed)
    claimed = 0  # bytes claimed by the headers and members read so far
    chain = 0  # extended headers before the member being read

    def next(self) -> tarfile.TarInfo | None:
        self.chain = 0
        member = super().next()
        self.members.clear()  # tarfile keeps every header read; a capture is read once, in order
        if member is not None:
            self.claim(member.size, f"member {printable_name(member.name)!r}")
        return member

    def extended(self, header: tarfile.TarInfo) -> None:
        self.chain += 1
        if self.chain > MAX_HEADER_CHAIN:
            raise _Refused(f"more than {MAX_HEADER_CHAIN} extended headers (long names, PAX) before one member")
        if header.size > MAX_HEADER_BYTES:
            raise _Refused(
                f"an extended header (long name or PAX, type {header.type.decode('latin-1')!r}) of "
                f"{header.size} bytes, over {MAX_HEADER_BYTES}"
            )
        self.claim(header.size, "extended headers")

    def claim(self, size: int, what: str) -> None:
        self.claimed += max(size, 0)
        if self.claimed > MAX_CAPTURE_BYTES:
            raise _Refused(f"over {MAX_CAPTURE_BYTES} bytes uncompressed (at {what})")


class _Refused(Exception):
    """An archive refused by a limit, raised from inside ``tarfile`` (which re-raises it as it is)."""


def printable_name(name: str) -> str:
    """A member name as an error line may show it: control characters escaped, at most 100 characters."""
    shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name[:100])
    return shown + ("..." if len(name) > 100 else "")


#: Largest manifest.json (a 5,000-page Stargate capture's is ~2 MB).
MAX_MANIFEST_BYTES = 32 * 1024 * 1024
#: Most JSON values in it (counted as commas, braces and brackets before parsing, as Prism's
#: answers are): 20 MB of ``[{},{},...]`` parsed to 567 MB; a 5,000-page capture holds ~60,000.
MAX_MANIFEST_VALUES = 1_000_000
#: Deepest nesting of a manifest (a capture's is 4 deep: exchanges, an entry, its params).
MAX_MANIFEST_DEPTH = 16


def _not_finite(value: str) -> Any:
    raise ValueError(f"{value} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{text[:40]} is out of range")
    return value


def parse_manifest(data: bytes) -> dict[str, Any]:
    """``manifest.json`` parsed within :data:`MAX_MANIFEST_BYTES`, :data:`MAX_MANIFEST_VALUES` and
    :data:`MAX_MANIFEST_DEPTH`, numbers finite (``1e400`` and ``NaN`` refused: ``int(inf)`` raised
    OverflowError deep in a replay); ValueError says why not."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ValueError(f"{len(data)} bytes, over {MAX_MANIFEST_BYTES}")
    values = data.count(b",") + data.count(b"{") + data.count(b"[")
    if values > MAX_MANIFEST_VALUES:
        raise ValueError(f"more than {MAX_MANIFEST_VALUES} JSON values ({len(data)} bytes)")
    try:
        doc = json.loads(data, parse_constant=_not_finite, parse_float=_finite_float)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_MANIFEST_DEPTH}") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the number checks above
        raise ValueError(f"not JSON: {str(exc)[:200]}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"not a JSON object but {type(doc).__name__}")
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:  # without recursion: the depth is what is being checked
        node, depth = stack.pop()
        if depth > MAX_MANIFEST_DEPTH:
            raise ValueError(f"nested deeper than {MAX_MANIFEST_DEPTH}")
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return doc


def read_archive(path: str, kind: str, fmt: int, producer: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(the manifest, every file by name) of the capture at ``path``, held in memory within
    :data:`MAX_CAPTURE_BYTES` (counting extended headers: :class:`_BoundedTarInfo`) and
    :data:`MAX_MEMBERS`; ``producer`` (``vcenter-exporter capture``) is named when the file is not
    a capture of ``kind`` and format ``fmt``. Only a regular file is opened (a FIFO blocked for
    ever); the manifest is parsed with :func:`parse_manifest`."""
    files: dict[str, bytes] = {}
    try:
        raw = open_regular(path)
    except OSError as exc:
        raise CaptureError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        with raw, _BoundedTar.open(fileobj=raw, mode="r:gz") as tar:
            for n, member in enumerate(tar):
                if n >= MAX_MEMBERS:
                    raise CaptureError(f"{path}: more than {MAX_MEMBERS} members")
                if not member.isfile():
                    continue
                if member.name == MANIFEST and member.size > MAX_MANIFEST_BYTES:
                    raise CaptureError(f"{path}: {MANIFEST}: {member.size} bytes, over {MAX_MANIFEST_BYTES}")
                f = tar.extractfile(member)
                if f is not None:
                    files[member.name] = f.read()
    except _Refused as exc:
        raise CaptureError(f"{path}: refused: {exc}") from None
    except (OSError, tarfile.TarError, EOFError, zlib.error, ValueError, OverflowError) as exc:
        cause = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise CaptureError(f"{path}: not a capture (a .tar.gz written by {producer}): {cause}") from None
    if MANIFEST not in files:
        raise CaptureError(f"{path}: no {MANIFEST} (not a capture written by {producer})")
    try:
        manifest = parse_manifest(files[MANIFEST])
    except ValueError as exc:
        raise CaptureError(f"{path}: {MANIFEST}: {exc}") from None
    if manifest.get("kind") != kind:
        raise CaptureError(f"{path}: {MANIFEST}: kind is not {kind!r}")
    if manifest.get("format") != fmt:
        raise CaptureError(
            f"{path}: {MANIFEST}: format {str(manifest.get('format'))[:40]!r}, this exporter reads {fmt}"
        )
    return manifest, files


# -- the manifest's fields, type-checked: a ValueError (the caller names the file) ---------------
#: Largest number a manifest field holds (byte counts, statuses, seconds, page sizes).
MAX_FIELD_NUMBER = 2**53


def field_int(entry: dict[str, Any], key: str, default: int | None = 0, lo: int = 0, hi: int = MAX_FIELD_NUMBER) -> Any:
    """``entry[key]``, an integer from ``lo`` to ``hi`` (``default`` when absent or null)."""
    value = entry.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or not lo <= value <= hi:
        raise ValueError(f"{key}: {_shown(value)} is not an integer from {lo} to {hi}")
    return int(value)


def field_float(
    entry: dict[str, Any], key: str, default: float | None = 0.0, hi: float = MAX_FIELD_NUMBER, lo: float = 0.0
) -> Any:
    """``entry[key]``, a number from ``lo`` to ``hi`` (``default`` when absent or null)."""
    value = entry.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise ValueError(f"{key}: {_shown(value)} is not a number from {lo:g} to {hi:g}")
    return float(value)


def field_str(entry: dict[str, Any], key: str, default: str = "") -> str:
    """``entry[key]``, a string (``default`` when absent or null)."""
    value = entry.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValueError(f"{key}: {_shown(value)} is not a string")
    return value


def field_dict(entry: dict[str, Any], key: str) -> dict[str, Any]:
    """``entry[key]``, an object (empty when absent or null)."""
    value = entry.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{key}: {_shown(value)} is not an object")
    return value


def field_list(entry: dict[str, Any], key: str) -> list[Any]:
    """``entry[key]``, a list (empty when absent or null)."""
    value = entry.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key}: {_shown(value)} is not a list")
    return value


def entries(manifest: dict[str, Any], key: str, path: str) -> list[dict[str, Any]]:
    """``manifest[key]``, a list of objects; else a CaptureError naming the file and the entry."""
    try:
        items = field_list(manifest, key)
    except ValueError as exc:
        raise CaptureError(f"{path}: {MANIFEST}: {exc}") from None
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise CaptureError(f"{path}: {MANIFEST}: {key}[{i}]: {_shown(item)} is not an object")
    return items


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= 40 else text[:40] + "..."


def read_capture(
    path: str,
    kind: str,
    fmt: int,
    producer: str,
    exchange: Callable[[dict[str, Any], dict[str, bytes]], E],
    key: str = "exchanges",
) -> Capture[E]:
    """The capture at ``path`` (see :func:`read_archive`), each entry of the manifest's ``key``
    list made an exchange by ``exchange`` (entry, the archive's files), which raises KeyError,
    TypeError, ValueError or AttributeError for an entry it cannot read: a CaptureError naming
    the entry."""
    manifest, files = read_archive(path, kind, fmt, producer)
    exchanges = []
    for i, entry in enumerate(entries(manifest, key, path)):
        try:
            exchanges.append(exchange(entry, files))
        except KeyError as exc:
            raise CaptureError(f"{path}: {MANIFEST}: {key}[{i}]: {exc} missing") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise CaptureError(f"{path}: {MANIFEST}: {key}[{i}]: {exc}") from None
    if not isinstance(manifest.get("target"), str) or not manifest["target"]:
        raise CaptureError(f"{path}: {MANIFEST}: no target")
    return Capture(manifest, exchanges, files.get(METRICS, b"").decode("utf-8", "replace"), path)


def timing(seconds: float | None, offset: float) -> dict[str, Any]:
    """A manifest entry's ``seconds`` (from the request to the answer; None: no answer) and
    ``requested_at`` (seconds after the capture started), to the microsecond."""
    return {"seconds": None if seconds is None else round(seconds, 6), "requested_at": round(offset, 6)}


def timing_of(entry: dict[str, Any], seconds: float | None = 0.0) -> tuple[Any, float]:
    """(``seconds``, ``requested_at``) of a manifest entry (:func:`timing`), checked; ValueError."""
    return field_float(entry, "seconds", seconds), field_float(entry, "requested_at", lo=-MAX_FIELD_NUMBER)


def member(files: dict[str, bytes], name: str) -> bytes:
    """The archive's member ``name`` of a manifest entry; ValueError when it is not there."""
    if name not in files:
        raise ValueError(f"file {name[:100]!r} is not in the archive")
    return files[name]


def status_of(entry: dict[str, Any]) -> int:
    """A manifest entry's HTTP status, which must be there; ValueError."""
    status = field_int(entry, "status", None, 100, 999)
    if status is None:
        raise ValueError("status missing")
    return int(status)


@dataclass(frozen=True)
class Archive(Generic[X]):
    """One exporter's capture archive (``exporter``: ``prism``, whose ``prism-exporter capture``
    writes a ``prism-capture``), the README it carries (``{anonymized}``, ``{name}`` and
    ``{target}`` filled in), the manifest's list of exchanges (``key``) and how an entry of it is
    read back (``exchange``: entry, the archive's files -> the exporter's exchange), the
    exposition's lines a replay need not reproduce (``volatile``: durations, ages) and the
    format (``fmt``)."""

    exporter: str
    readme: str
    exchange: Callable[[dict[str, Any], dict[str, bytes]], X]
    volatile: Sequence[str]
    key: str = "exchanges"
    fmt: int = 1

    @property
    def kind(self) -> str:
        """The manifest's ``kind`` (``prism-capture``): what a file must say to be read as one."""
        return f"{self.exporter}-capture"

    def manifest(self, created: datetime, target: str, outcome: Any, duration: float) -> dict[str, Any]:
        """The manifest's first entries, the same for every exporter: what wrote the capture,
        when, the target and the probe's outcome (``up``, ``kind``, ``cause``)."""
        return {
            "format": self.fmt,
            "kind": self.kind,
            "exporter": f"{self.exporter}-exporter",
            "version": version(),
            "revision": revision(),
            "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "target": target,
            "up": outcome.up,
            "error_kind": outcome.kind,
            "error": outcome.cause,
            "duration_seconds": round(duration, 6),
        }

    def write(self, cap: Capture[X], path: str, metrics: bytes) -> int:
        """Write ``cap`` (each exchange's manifest entry and files) and ``metrics`` to the
        ``.tar.gz`` at ``path`` (its README names the capture's ``{target}``); its size in bytes.
        CaptureError names the file and the cause."""
        cap.manifest[self.key] = [ex.manifest(n) for n, ex in enumerate(cap.exchanges)]
        files = [f for n, ex in enumerate(cap.exchanges) for f in ex.files(n)]
        return write_archive(path, cap.manifest, self.readme, metrics, files, target=cap.target)

    def read(self, path: str) -> Capture[X]:
        """The capture at ``path``, each exchange checked (:func:`read_capture`): CaptureError."""
        producer = f"{self.exporter}-exporter capture"  # named when the file is not a capture
        return read_capture(path, self.kind, self.fmt, producer, self.exchange, self.key)

    def comparable(self, exposition: str) -> list[str]:
        """The sample lines a replay must reproduce: all but comments and the volatile series."""
        return comparable(exposition, self.volatile)


class Answers(Generic[E]):
    """A capture's exchanges looked up as a replay asks for them: by one key after another (the
    same request, then a looser match: the same path, method or batch), the first exchange
    recorded under a key winning."""

    def __init__(self, exchanges: Iterable[E], *keys: Callable[[E], Hashable]) -> None:
        self._by: list[dict[Hashable, E]] = [{} for _ in keys]
        for ex in exchanges:
            for key, by in zip(keys, self._by, strict=True):
                by.setdefault(key(ex), ex)

    def find(self, *values: Hashable) -> E | None:
        """The exchange recorded under the first of ``values`` (one per key, in order) that has one."""
        for value, by in zip(values, self._by, strict=True):
            if (ex := by.get(value)) is not None:
                return ex
        return None


def anonymize_target(anon: Anonymizer, target: str) -> None:
    """Teach ``anon`` the target's host (``host``, ``host:port``, ``[v6]:port``), before the answers."""
    host = target.rsplit(":", 1)[0] if target.count(":") == 1 else target
    anon.host(host.strip("[]"))


def anonymize_manifest(anon: Anonymizer, manifest: dict[str, Any], target: str) -> None:
    """The manifest's target and error anonymized, and what was replaced."""
    manifest["target"] = anon.text(target)
    manifest["error"] = anon.text(str(manifest.get("error", "")))
    manifest["anonymized"] = True
    manifest["anonymization"] = anon.summary()


def comparable(exposition: str, volatile: Sequence[str]) -> list[str]:
    """The sample lines a replay must reproduce: all but comments and the ``volatile`` series
    (durations, ages)."""
    return [line for line in exposition.splitlines() if line and not line.startswith(("#", *volatile))]


def capture_parser(
    exporter: str, what: str, description: str, timeout: float = 120.0, epilog: str | None = None
) -> argparse.ArgumentParser:
    """The ``<exporter> capture`` arguments: ``--target``, ``-o``, ``--config.file``,
    ``--no-anonymize``, ``--redact``, ``--anonymize-free-text``, ``--timeout`` (logging arguments are the caller's)."""
    ap = argparse.ArgumentParser(
        prog=f"{exporter}-exporter capture",
        description=description,
        epilog=epilog,
        # examples in an epilog keep their lines (and the description, written wrapped, its own)
        formatter_class=argparse.RawDescriptionHelpFormatter if epilog else argparse.HelpFormatter,
    )
    ap.add_argument("--target", required=True, help=f"the {what}, as in /probe?target= (host[:port])")
    ap.add_argument(
        "-o",
        "--output",
        default=None,
        help=f"the file to write (default: {exporter}-capture-<UTC time>.tar.gz in the current directory)",
    )
    ap.add_argument(
        "--config.file",
        dest="config_file",
        default=None,
        help="the exporter's config file (its targets, credentials, TLS, limits)",
    )
    ap.add_argument(
        "--no-anonymize",
        dest="anonymize",
        action="store_false",
        help="keep names, addresses and UUIDs as the source wrote them (default: replaced)",
    )
    ap.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="TEXT",
        help="also replace TEXT wherever it appears (a cluster, company or domain name); repeat",
    )
    ap.add_argument(
        "--anonymize-free-text",
        dest="free_text",
        action="store_true",
        help="also replace e-mail addresses, host-name-shaped words, Windows paths and query values "
        "anywhere (off by default: a protocol word can look like a host name; replay --check tells)",
    )
    ap.add_argument("--timeout", type=float, default=timeout, help="seconds the probe may take (default: %(default)s)")
    return ap


def output_problem(path: str) -> str | None:
    """Why ``path`` cannot be written as ``-o``, checked before the probe (a directory, a missing
    folder), or None."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        return f"{path}: is a directory (give a file name)"
    if not os.path.isdir(folder):
        return f"{path}: no such folder {folder}"
    if not os.access(folder, os.W_OK):
        return f"{path}: the folder {folder} is not writable"
    return None


def default_output(exporter: str) -> str:
    """``<exporter>-capture-<UTC time>.tar.gz``."""
    return time.strftime(f"{exporter}-capture-%Y%m%dT%H%M%SZ.tar.gz", time.gmtime())


def print_written(output: str, size: int, answers: str, manifest: dict[str, Any], summary: str) -> None:
    """What ``capture`` wrote, and the check to make before sending it."""
    m = manifest
    print(
        f"wrote {output} ({size / 1e6:.1f} MB): {answers}, {m['vms']} VMs, {m['disks']} disks, "
        f"probe {'up' if m['up'] else 'DOWN: ' + str(m['error'])}, {summary}"
    )
    print_check(output)


def print_check(output: str) -> None:
    """The check to make before sending a capture."""
    print(f"  check before sending: tar -xzf {output} && grep -ril '<your company or domain name>' .")


def replay_parser(exporter: str, description: str = "") -> argparse.ArgumentParser:
    """The ``<exporter> replay`` arguments: the capture, ``-o`` and ``--check [FILE]``."""
    ap = argparse.ArgumentParser(
        prog=f"{exporter}-exporter replay",
        description=description
        or "Print the metrics of one probe answered from a capture; with --check, compare them "
        "with the capture's metrics.prom (or FILE), all but durations and ages.",
    )
    ap.add_argument("capture", help=f"a .tar.gz written by {exporter}-exporter capture")
    ap.add_argument("-o", "--output", default="-", help="write the metrics to this file (default: stdout)")
    ap.add_argument(
        "--check",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="exit 1 if the metrics differ from FILE (default: the capture's metrics.prom)",
    )
    return ap


#: Largest metrics file --check reads (an exposition of 10,000 vdisks is ~20 MB).
MAX_CHECK_BYTES = 256 * 1024 * 1024


def read_expected(path: str) -> str:
    """The --check file: a regular file (a FIFO blocked for ever), within MAX_CHECK_BYTES."""
    with open_regular(path) as f:
        data = f.read(MAX_CHECK_BYTES + 1)
    if len(data) > MAX_CHECK_BYTES:
        raise OSError(errno.EFBIG, f"over {MAX_CHECK_BYTES} bytes: not an exposition")
    return data.decode("utf-8")


def replay_output(
    name: str, check: str | None, recorded: str, metrics: str, volatile: Sequence[str], output: str = "-"
) -> int:
    """``replay``'s answer: the metrics (no ``check``: to stdout or the file ``output``), or their
    comparison with ``check`` (a file; ``""``: the capture's own ``recorded`` metrics.prom); the
    exit status."""
    if check is None:
        if output == "-":
            sys.stdout.write(metrics)
            return 0
        try:
            with open(output, "w", encoding="utf-8") as f:
                f.write(metrics)
        except OSError as exc:
            print(f"error: -o {output}: cannot write: {exc.strerror or exc}", file=sys.stderr)
            return 1
        return 0
    try:
        expected = read_expected(check) if check else recorded
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: --check {check}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
        return 2
    want, got = comparable(expected, volatile), comparable(metrics, volatile)
    if want == got:
        print(f"{name}: {len(got)} lines, as expected")
        return 0
    missing = [line for line in want if line not in set(got)]
    extra = [line for line in got if line not in set(want)]
    print(f"{name}: the metrics differ: {len(missing)} lines expected and not made, {len(extra)} made and not expected")
    for line in missing[:10]:
        print(f"  - {line}")
    for line in extra[:10]:
        print(f"  + {line}")
    return 1


@dataclass(frozen=True)
class Commands:
    """An exporter's ``capture`` and ``replay`` commands, from its :class:`Archive` (how a
    capture is written, and the series a replay need not reproduce) and its own steps:
    ``capture`` (key, settings, config, the command's arguments -> the capture), ``anonymize``
    (capture, texts to redact, free text too -> what was replaced), ``replay`` (capture, timeout
    -> metrics) and ``read`` (path -> capture with ``.metrics``, every field the replay uses
    checked; CaptureError); for :meth:`resolve`, ``load_config`` (config file,
    ``extra_targets=`` -> the exporter's config; ConfigError or ValueError) and ``targets``
    (config -> its target pool, whose ``resolve`` raises BadRequest for a target that may not be
    probed).

    An exporter whose steps differ (Stargate: an allow-list of patterns, ``--discover``, pages)
    overrides the hooks: :meth:`add_capture_args`, :meth:`resolve`, :meth:`replay_captured`,
    :meth:`print_written`, :meth:`add_replay_args`, :meth:`replay_capture`."""

    exporter: str  # "vcenter": vcenter-exporter capture, vcenter-capture-<time>.tar.gz
    what: str  # "vCenter"
    description: str
    answers: str  # how the exchanges are counted in the summary ("SOAP answers")
    archive: Archive[Any]
    capture: Callable[[str, Any, Any, argparse.Namespace], Any]
    anonymize: Callable[[Any, Sequence[str], bool], Anonymizer]
    replay: Callable[[Any, float], bytes]
    read: Callable[[str], Any]
    load_config: Callable[..., Any] | None = None
    targets: Callable[[Any], Any] | None = None
    timeout: float = 120.0  # --timeout's default
    epilog: str | None = None  # capture --help's examples
    replay_description: str = ""

    # -- hooks ---------------------------------------------------------------------------------
    def add_capture_args(self, ap: argparse.ArgumentParser) -> None:
        """The exporter's own ``capture`` arguments."""

    def resolve(self, args: argparse.Namespace) -> tuple[str, Any, Any]:
        """(key, settings, config) of ``--target``: ConfigError, ValueError or BadRequest say why
        it may not be captured (exit 2, before any connection)."""
        assert self.load_config is not None and self.targets is not None
        # --target is listed like --<exporter>.target: the default credentials go to it and nowhere else.
        config = self.load_config(args.config_file, extra_targets=[args.target])
        key, cfg = self.targets(config).resolve(args.target)
        return key, cfg, config

    def replay_captured(self, cap: Any, config: Any, args: argparse.Namespace) -> bytes:
        """The metrics written with a capture just made (a replay of its answers)."""
        return self.replay(cap, args.timeout)

    def print_written(self, output: str, size: int, cap: Any, summary: str) -> None:
        """What ``capture`` wrote, and the check to make before sending it."""
        print_written(output, size, f"{len(cap.exchanges)} {self.answers}", cap.manifest, summary)

    def add_replay_args(self, ap: argparse.ArgumentParser) -> None:
        """The exporter's own ``replay`` arguments."""

    def replay_capture(self, cap: Any, args: argparse.Namespace) -> bytes:
        """The metrics of ``replay``."""
        return self.replay(cap, 60.0)

    # -- the commands --------------------------------------------------------------------------
    def capture_main(self, argv: list[str]) -> int:
        ap = capture_parser(self.exporter, self.what, self.description, self.timeout, self.epilog)
        self.add_capture_args(ap)
        add_logging_args(ap)
        args = ap.parse_args(argv)
        setup_logging(args.log_level, args.log_format)
        try:
            key, cfg, config = self.resolve(args)
        except (ConfigError, ValueError, BadRequest) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        output = args.output or default_output(self.exporter)
        if problem := output_problem(output):
            print(f"error: -o {problem}", file=sys.stderr)
            return 2
        cap = self.capture(key, cfg, config, args)
        summary = "NOT anonymized (--no-anonymize)"
        if args.anonymize:
            summary = "anonymized: " + self.anonymize(cap, args.redact, args.free_text).summary() + " replaced"
        metrics = self.replay_captured(cap, config, args)
        try:
            size = self.archive.write(cap, output, metrics)
        except CaptureError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        self.print_written(output, size, cap, summary)
        return 0 if cap.manifest["up"] else 1

    def replay_main(self, argv: list[str]) -> int:
        ap = replay_parser(self.exporter, self.replay_description)
        self.add_replay_args(ap)
        add_logging_args(ap)
        args = ap.parse_args(argv)
        setup_logging(args.log_level, args.log_format)
        if args.output != "-" and (problem := output_problem(args.output)):
            print(f"error: -o {problem}", file=sys.stderr)
            return 2
        try:
            cap = self.read(args.capture)
            metrics = self.replay_capture(cap, args).decode()
        except CaptureError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return replay_output(args.capture, args.check, cap.metrics, metrics, self.archive.volatile, args.output)
