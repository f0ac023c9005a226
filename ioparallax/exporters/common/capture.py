"""The capture archive shared by the multi-target exporters (vCenter, Prism): writing and reading
the ``.tar.gz``, its manifest, the anonymized target, and the ``capture`` / ``replay`` commands
(:class:`Commands`: arguments, steps and output).

Each exporter keeps what is its own: the exchanges it records (SOAP requests and answers, JSON
answers with their parameters), what it learns for anonymization, and the stand-in client of its
replay. Errors name the archive and the cause (:class:`CaptureError`), never a traceback.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from ioparallax.exporters.common.anonymize import Anonymizer
from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.exporters.common.web.app import BadRequest
from ioparallax.version import revision, version
from ioparallax.yamlconf import ConfigError

MANIFEST = "manifest.json"
METRICS = "metrics.prom"
#: A capture read back is held in memory: more than this (uncompressed) or this many members is refused.
MAX_CAPTURE_BYTES = 1024 * 1024 * 1024
MAX_MEMBERS = 100_000


class CaptureError(Exception):
    """A capture that cannot be written or read; the message names the file and the cause."""


E = TypeVar("E")


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


def probe_manifest(
    kind: str, fmt: int, exporter: str, created: datetime, target: str, snap: Any, duration: float
) -> dict[str, Any]:
    """The manifest's first entries, the same for every exporter: what wrote the capture, when,
    the target and the probe's outcome (``snap``: ``up``, ``kind``, ``cause``)."""
    return {
        "format": fmt,
        "kind": kind,
        "exporter": exporter,
        "version": version(),
        "revision": revision(),
        "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": target,
        "up": snap.up,
        "error_kind": snap.kind,
        "error": snap.cause,
        "duration_seconds": round(duration, 6),
    }


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


def read_archive(path: str, kind: str, fmt: int, producer: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(the manifest, every file by name) of the capture at ``path``, held in memory within
    :data:`MAX_CAPTURE_BYTES` and :data:`MAX_MEMBERS`; ``producer`` (``vcenter-exporter capture``)
    is named when the file is not a capture of ``kind`` and format ``fmt``."""
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, "r:gz") as tar:
            for n, member in enumerate(tar):
                if n >= MAX_MEMBERS:
                    raise CaptureError(f"{path}: more than {MAX_MEMBERS} members")
                if not member.isfile():
                    continue
                total += member.size
                if total > MAX_CAPTURE_BYTES:
                    raise CaptureError(f"{path}: over {MAX_CAPTURE_BYTES} bytes uncompressed")
                f = tar.extractfile(member)
                if f is not None:
                    files[member.name] = f.read()
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise CaptureError(f"{path}: not a capture (a .tar.gz written by {producer}): {exc}") from None
    try:
        manifest = json.loads(files[MANIFEST])
    except KeyError:
        raise CaptureError(f"{path}: no {MANIFEST} (not a capture written by {producer})") from None
    except ValueError as exc:
        raise CaptureError(f"{path}: {MANIFEST} is not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != kind:
        raise CaptureError(f"{path}: {MANIFEST}: kind is not {kind!r}")
    if manifest.get("format") != fmt:
        raise CaptureError(f"{path}: {MANIFEST}: format {manifest.get('format')!r}, this exporter reads {fmt}")
    return manifest, files


def read_capture(
    path: str, kind: str, fmt: int, producer: str, exchange: Callable[[dict[str, Any], dict[str, bytes]], E]
) -> Capture[E]:
    """The capture at ``path`` (see :func:`read_archive`), each entry of the manifest's
    ``exchanges`` made an exchange by ``exchange`` (entry, the archive's files), which raises
    KeyError, TypeError, ValueError or AttributeError for an entry it cannot read: a CaptureError
    naming the entry."""
    manifest, files = read_archive(path, kind, fmt, producer)
    exchanges = []
    for i, entry in enumerate(manifest.get("exchanges") or []):
        try:
            exchanges.append(exchange(entry, files))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CaptureError(f"{path}: {MANIFEST}: exchanges[{i}]: {exc!r} missing or malformed") from None
    return Capture(manifest, exchanges, files.get(METRICS, b"").decode("utf-8", "replace"), path)


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


def capture_parser(exporter: str, what: str, description: str) -> argparse.ArgumentParser:
    """The ``<exporter> capture`` arguments: ``--target``, ``-o``, ``--config.file``,
    ``--no-anonymize``, ``--redact``, ``--anonymize-free-text``, ``--timeout`` (logging arguments are the caller's)."""
    ap = argparse.ArgumentParser(prog=f"{exporter}-exporter capture", description=description)
    ap.add_argument("--target", required=True, help=f"the {what}, as in /probe?target= (host[:port])")
    ap.add_argument("-o", "--output", default=None, help=f"default: {exporter}-capture-<UTC time>.tar.gz")
    ap.add_argument(
        "--config.file", dest="config_file", default=None, help="the exporter's config file (credentials, TLS)"
    )
    ap.add_argument("--no-anonymize", dest="anonymize", action="store_false", help="keep names, addresses and UUIDs")
    ap.add_argument("--redact", action="append", default=[], metavar="TEXT", help="also replace TEXT; repeat")
    ap.add_argument(
        "--anonymize-free-text",
        dest="free_text",
        action="store_true",
        help="also replace e-mail addresses, host-name-shaped words, Windows paths and query values "
        "anywhere (off by default: a protocol word can look like a host name; replay --check tells)",
    )
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds the probe may take (default: %(default)s)")
    return ap


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
    print(f"  check before sending: tar -xzf {output} && grep -ril '<your company or domain name>' .")


def replay_parser(exporter: str) -> argparse.ArgumentParser:
    """The ``<exporter> replay`` arguments: the capture and ``--check [FILE]``."""
    ap = argparse.ArgumentParser(
        prog=f"{exporter}-exporter replay",
        description="Print the metrics of one probe answered from a capture; with --check, compare them "
        "with the capture's metrics.prom (or FILE), all but durations and ages.",
    )
    ap.add_argument("capture")
    ap.add_argument("--check", nargs="?", const="", default=None, metavar="FILE")
    return ap


def replay_output(name: str, check: str | None, recorded: str, metrics: str, volatile: Sequence[str]) -> int:
    """``replay``'s answer: the metrics (no ``check``), or their comparison with ``check`` (a file;
    ``""``: the capture's own ``recorded`` metrics.prom); the exit status."""
    if check is None:
        sys.stdout.write(metrics)
        return 0
    try:
        with open(check, encoding="utf-8") if check else io.StringIO(recorded) as f:
            expected = f.read()
    except OSError as exc:
        print(f"error: {check}: {exc.strerror}", file=sys.stderr)
        return 2
    want, got = comparable(expected, volatile), comparable(metrics, volatile)
    if want == got:
        print(f"{name}: {len(got)} lines, as expected")
        return 0
    print(f"{name}: the metrics differ")
    for line in [x for x in want if x not in set(got)][:10]:
        print(f"  - {line}")
    for line in [x for x in got if x not in set(want)][:10]:
        print(f"  + {line}")
    return 1


@dataclass(frozen=True)
class Commands:
    """An exporter's ``capture`` and ``replay`` commands, from its own steps: ``load_config``
    (config file, ``extra_targets=`` -> the exporter's config; ConfigError or ValueError),
    ``targets`` (config -> its target pool, whose ``resolve`` raises BadRequest for a target that
    may not be probed), ``capture`` (key, settings, config, timeout -> the capture), ``anonymize``
    (capture, texts to redact, free text too -> what was replaced), ``replay`` (capture, timeout -> metrics),
    ``write`` (capture, path, metrics -> bytes written) and ``read`` (path -> capture with
    ``.metrics``; CaptureError)."""

    exporter: str  # "vcenter": vcenter-exporter capture, vcenter-capture-<time>.tar.gz
    what: str  # "vCenter"
    description: str
    answers: str  # how the exchanges are counted in the summary ("SOAP answers")
    volatile: Sequence[str]
    load_config: Callable[..., Any]
    targets: Callable[[Any], Any]
    capture: Callable[[str, Any, Any, float], Any]
    anonymize: Callable[[Any, Sequence[str], bool], Anonymizer]
    replay: Callable[[Any, float], bytes]
    write: Callable[[Any, str, bytes], int]
    read: Callable[[str], Any]

    def capture_main(self, argv: list[str]) -> int:
        ap = capture_parser(self.exporter, self.what, self.description)
        add_logging_args(ap)
        args = ap.parse_args(argv)
        setup_logging(args.log_level, args.log_format)
        try:
            # --target is listed like --<exporter>.target: the default credentials go to it and nowhere else.
            config = self.load_config(args.config_file, extra_targets=[args.target])
            key, cfg = self.targets(config).resolve(args.target)
        except (ConfigError, ValueError, BadRequest) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        output = args.output or default_output(self.exporter)
        cap = self.capture(key, cfg, config, args.timeout)
        summary = "NOT anonymized (--no-anonymize)"
        if args.anonymize:
            summary = "anonymized: " + self.anonymize(cap, args.redact, args.free_text).summary() + " replaced"
        metrics = self.replay(cap, args.timeout)
        try:
            size = self.write(cap, output, metrics)
        except CaptureError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print_written(output, size, f"{len(cap.exchanges)} {self.answers}", cap.manifest, summary)
        return 0 if cap.manifest["up"] else 1

    def replay_main(self, argv: list[str]) -> int:
        ap = replay_parser(self.exporter)
        add_logging_args(ap)
        args = ap.parse_args(argv)
        setup_logging(args.log_level, args.log_format)
        try:
            cap = self.read(args.capture)
            metrics = self.replay(cap, 60.0).decode()
        except CaptureError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return replay_output(args.capture, args.check, cap.metrics, metrics, self.volatile)
