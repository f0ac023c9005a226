"""What build of ioparallax is running: ``--version`` of every program and the exporters'
``<exporter>_build_info`` gauge, as Prometheus' own programs show them.

- version: the installed distribution's (``importlib.metadata``, the ``version`` of pyproject.toml);
- revision: the git commit when the code runs from a git checkout (``git rev-parse HEAD`` in the
  directory holding this package, once per process, with a timeout); else the commit stamped into
  the package at build time (``ioparallax/REVISION``, written by the Docker image's ``REVISION``
  build arg); else ``unknown``. The directory is checked for its own ``.git`` so that a venv inside
  some other checkout never reports that checkout's commit;
- the Python version the program runs on.

Nothing here raises: a missing distribution or git gives ``unknown``.
"""

from __future__ import annotations

import argparse
import functools
import platform
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

#: The distribution every program belongs to (pyproject.toml's name).
DISTRIBUTION = "ioparallax"

#: Seconds ``git rev-parse`` may take before the revision is given as unknown.
GIT_TIMEOUT = 2.0

UNKNOWN = "unknown"

_SOURCE_ROOT = Path(__file__).resolve().parent.parent
#: The commit a build stamped into the package (one line), where there is no checkout to ask.
_STAMP = Path(__file__).resolve().with_name("REVISION")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def version() -> str:
    """The installed ioparallax version (e.g. ``0.1.0``), or ``unknown`` when not installed."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN


@functools.cache
def revision(root: Path = _SOURCE_ROOT, stamp: Path = _STAMP) -> str:
    """The git commit of the checkout at ``root`` (the directory holding this package); outside a
    checkout the commit in ``stamp`` if it holds one; else ``unknown``: no stamp, no git, git
    refusing the directory, or slower than GIT_TIMEOUT."""
    if not (root / ".git").exists():
        return _stamped(stamp)
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    sha = out.stdout.decode("ascii", "replace").strip()
    return sha if out.returncode == 0 and _SHA.fullmatch(sha) else UNKNOWN


def _stamped(stamp: Path) -> str:
    try:
        sha = stamp.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return UNKNOWN
    return sha if _SHA.fullmatch(sha) else UNKNOWN


def python_version() -> str:
    return platform.python_version()


def version_line(program: str) -> str:
    """``stargate-exporter 0.1.0 (revision 79cc5c1..., python 3.11.2)``: what --version prints and
    the exporters log at start-up."""
    return f"{program} {version()} (revision {revision()}, python {python_version()})"


class _VersionAction(argparse.Action):
    """--version: print the version line on stdout and exit 0. The revision is looked up only when asked."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: str = argparse.SUPPRESS,
        help: str | None = None,
        program: str = "",
    ):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.program = program

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(version_line(self.program or parser.prog) + "\n")
        sys.stdout.flush()
        parser.exit(0)


def add_version_arg(parser: argparse.ArgumentParser, program: str | None = None) -> None:
    """Add ``--version`` to a program's parser (``program``: the name printed, default its prog)."""
    parser.add_argument(
        "--version",
        action=_VersionAction,
        program=program or parser.prog,
        help="print the version, git revision and Python version, and exit",
    )


def build_info_name(program: str) -> str:
    """``stargate-exporter`` -> ``stargate_exporter_build_info`` (blackbox_exporter_build_info's form)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", program) + "_build_info"


class BuildInfoCollector:
    """``<exporter>_build_info{version, revision, pythonversion} 1`` on an exporter's own /metrics."""

    def __init__(self, program: str):
        self.program = program
        self.name = build_info_name(program)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            self.name,
            f"A metric with a constant '1' value labeled by version, revision and pythonversion "
            f"from which {self.program} was built.",
            labels=["version", "revision", "pythonversion"],
        )
        family.add_metric([version(), revision(), python_version()], 1)
        yield family
