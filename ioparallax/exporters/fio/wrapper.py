"""Wrapper mode: run fio, follow its status records while it runs.

fio is started with ``--output-format=json+`` and ``--status-interval=1`` added unless the command
already chooses them. Its JSON goes to the ``--output`` file the command names or, if none, its
stdout is written to a file the exporter then tails like any watched file (so ``note:`` lines on
stdout are skipped exactly as in a watched file). fio's stderr is logged, one line per event. The
process and the serving are :mod:`ioparallax.exporters.common.watch.wrapper`'s.
"""

from __future__ import annotations

import logging

from ioparallax.exporters.common.watch.wrapper import RunCollector, RunFamilies, WrappedRun

log = logging.getLogger(__name__)

FAMILIES = RunFamilies(
    running="fio_run_running",
    running_help="1 while the fio started by 'fio-exporter run' runs.",
    exit_code="fio_run_exit_code",
    exit_code_help="Exit code of the fio started by 'fio-exporter run' (negative: killed by that signal).",
)


def prepare_command(argv: list[str], status_interval: str = "1") -> tuple[list[str], str | None]:
    """Add json+ and a status interval if the fio command lacks them; return (argv, --output path)."""
    args = list(argv)
    if not args:
        raise ValueError("no fio command given (expected: run -- fio [options] jobfile)")
    has_format = any(a.startswith("--output-format") for a in args)
    has_interval = any(a.startswith("--status-interval") for a in args)
    output = None
    for i, a in enumerate(args):
        if a.startswith("--output="):
            output = a.split("=", 1)[1]
        elif a == "--output" and i + 1 < len(args):
            output = args[i + 1]
    extra = []
    if not has_format:
        extra.append("--output-format=json+")
    if not has_interval:
        extra.append(f"--status-interval={status_interval}")
    return [args[0], *extra, *args[1:]], output


class FioRun(WrappedRun):
    """One fio process; stopped by PID. ``output_path`` is the file holding its JSON."""

    def __init__(self, argv: list[str], output_path: str, stdout_to_file: bool):
        super().__init__("fio", argv, output_path, log, stdout_to_file=stdout_to_file)


class FioRunCollector(RunCollector):
    """Whether the wrapped fio still runs, and how it exited."""

    def __init__(self, run: FioRun):
        super().__init__(run, FAMILIES)
