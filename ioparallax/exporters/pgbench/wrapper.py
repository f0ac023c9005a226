"""Wrapper mode: run pgbench, follow its output while it runs.

pgbench prints its progress lines on stderr and its summary on stdout; both are written, in the
order pgbench writes them, to one file that the exporter follows like any watched file. ``-P 5``
is added unless the command asks for a progress interval (without one pgbench prints nothing
until it ends and the live view stays empty). The process and the serving are
:mod:`ioparallax.exporters.common.watch.wrapper`'s.
"""

from __future__ import annotations

import logging

from ioparallax.exporters.common.watch.wrapper import RunCollector, RunFamilies, WrappedRun

log = logging.getLogger(__name__)

DEFAULT_PROGRESS_S = "5"

FAMILIES = RunFamilies(
    running="pgbench_command_running",
    running_help="1 while the pgbench started by 'pgbench-exporter run' runs.",
    exit_code="pgbench_command_exit_code",
    exit_code_help="Exit code of the pgbench started by 'pgbench-exporter run' (2: some clients aborted; "
    "negative: killed by that signal).",
)


def has_progress(argv: list[str]) -> bool:
    """Whether a pgbench command line sets a progress interval (-P N, -PN, --progress[=N])."""
    return any(
        a == "-P" or (a.startswith("-P") and a[2:].isdigit()) or a.startswith("--progress=") or a == "--progress"
        for a in argv[1:]
    )


def prepare_command(argv: list[str], progress_s: str = DEFAULT_PROGRESS_S) -> list[str]:
    """The pgbench command with ``-P`` added when it has none."""
    args = list(argv)
    if not args:
        raise ValueError("no pgbench command given (expected: run -- pgbench [options] [dbname])")
    if not has_progress(args):
        args = [args[0], "-P", progress_s, *args[1:]]
    return args


class PgbenchRun(WrappedRun):
    """One pgbench process, its stdout and stderr written to ``output_path``; stopped by PID."""

    def __init__(self, argv: list[str], output_path: str):
        super().__init__("pgbench", argv, output_path, log, merge_stderr=True)


class PgbenchRunCollector(RunCollector):
    """Whether the wrapped pgbench still runs, and how it exited."""

    def __init__(self, run: PgbenchRun):
        super().__init__(run, FAMILIES)
