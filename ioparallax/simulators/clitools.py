"""What the simulators' command lines do alike: the parser with the scenario argument, the
simulated clock, starting (or saying why not), the address file a launcher polls for, and serving
until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ioparallax.exporters.common.logsetup import add_logging_args
from ioparallax.version import add_version_arg
from ioparallax.yamlconf import ConfigError


def simulator_parser(prog: str, description: str, epilog: str, examples: str) -> argparse.ArgumentParser:
    """The parser of a served simulator: its texts (the epilog as written) and the optional
    ``scenario`` (``examples``: library names to show in its help)."""
    p = argparse.ArgumentParser(
        prog=prog, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "scenario", nargs="?", default=None, help=f"scenario name from the library ({examples}, ...) or a YAML path"
    )
    return p


def parse_simulator_args(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``argv`` parsed, after the logging flags and --version are added; a scenario or
    ``--synthetic-vdisks`` is required."""
    add_logging_args(p)
    add_version_arg(p)
    args = p.parse_args(argv)
    if args.scenario is None and args.synthetic_vdisks is None:
        p.error("give a scenario or --synthetic-vdisks N")
    return args


def add_clock_args(p: argparse.ArgumentParser, answers: str) -> None:
    """``--freeze-at EPOCH`` (``answers``: what the frozen clock makes exact, such as "pages")."""
    p.add_argument(
        "--freeze-at",
        type=float,
        metavar="EPOCH",
        help=f"stop the clock at this Unix time (exact, repeatable {answers})",
    )


def clock_of(args: argparse.Namespace) -> Callable[[], float]:
    """The wall clock, or the time ``--freeze-at`` froze it at."""
    frozen = args.freeze_at
    return (lambda: frozen) if frozen is not None else time.time


class _Startable(Protocol):
    def start(self) -> Any: ...


_S = TypeVar("_S", bound=_Startable)


def start_simulator(prog: str, make: Callable[[], _S]) -> _S | None:
    """The simulator ``make()`` builds, started; None after printing ``prog: error: ...`` when the
    scenario, an address or a port is wrong (the caller exits 2)."""
    try:
        sim = make()
        sim.start()
    except (ConfigError, ValueError, OSError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return None
    return sim


def write_json(path: str, doc: Any, indent: int | None = None) -> None:
    """``doc`` as JSON to ``path``, atomically: whoever polls for the file reads it whole, never
    half-written."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=indent)
    os.replace(tmp, path)


def serve_until_signal(stop: Callable[[], None]) -> int:
    """Wait for SIGTERM or SIGINT, then ``stop()`` the simulator; exit code 0."""
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    stopping.wait()
    stop()
    return 0
