"""The command line of a watch exporter, built from a small per-exporter :class:`WatchProgram`.

Every watch exporter has ``serve`` (the default: watch paths, serve ``/metrics``) and ``convert``
(the exposition of the files named, once); diskspd and esxtop add ``backfill`` (a run's own series
with their own timestamps), fio and pgbench ``run`` (:mod:`.wrapper`). The flags and the
settings file are the exporter's :class:`~ioparallax.exporters.common.watchconfig.WatchSpec`;
this module holds what the commands do alike: the parser, serving the collectors, printing an
exposition and the bad files, writing a backfill and handing it to ``promtool``, and ``main``.
What stays in the exporter's ``cli.py``: its texts, how it builds its watcher and collectors, and
which files it calls bad.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from ioparallax.exporters.common.backfill import FORMATS
from ioparallax.exporters.common.logsetup import escape_text
from ioparallax.exporters.common.watch.wrapper import RunTexts, add_run_parser, command_of
from ioparallax.exporters.common.watchconfig import WatchSettings, WatchSpec
from ioparallax.exporters.common.web.app import ExporterApp
from ioparallax.exporters.common.web.startup import serve
from ioparallax.yamlconf import ConfigError


@dataclass(frozen=True)
class Texts:
    """A command's ``help`` (one line in the list of commands) and ``description`` (its --help)."""

    help: str
    description: str


#: What a command does: (the settings read, the parsed arguments) -> exit code.
Handler = Callable[[Any, argparse.Namespace], int]


@dataclass(frozen=True)
class WatchProgram:
    """One watch exporter's program: its settings spec, texts and commands. ``serve`` and
    ``convert`` always; ``run -- <tool>`` with ``run`` (:mod:`.wrapper`), ``backfill`` with its
    texts. ``convert_metavar``: what ``convert`` reads (``FILE``; vdbench: ``DIR``)."""

    spec: WatchSpec
    description: str  # the exporter's one paragraph: --help and the landing page
    serve_texts: Texts
    convert_texts: Texts
    convert_metavar: str = "FILE"
    run_texts: RunTexts | None = None
    backfill_texts: Texts | None = None
    escape_names: bool = False  # escape control characters in the file names convert reports

    @property
    def commands(self) -> tuple[str, ...]:
        run = ("run",) if self.run_texts else ()
        return ("serve", *run, "convert", *(("backfill",) if self.backfill_texts else ()))

    @property
    def convert_dest(self) -> str:
        return {"FILE": "files", "DIR": "dirs"}[self.convert_metavar]

    @property
    def name(self) -> str:
        return self.spec.program

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"ioparallax.exporters.{self.spec.prefix}")

    def build_parser(self) -> argparse.ArgumentParser:
        """The parser (with --version) and its commands, in :attr:`commands` order."""
        serve = self.serve_texts
        parser, sub = self.spec.parser(self.description, self.commands, serve.help, serve.description)
        if self.run_texts is not None:
            add_run_parser(sub, self.spec, self.run_texts)
        conv = self.convert_texts
        self.spec.add_convert(sub, conv.help, conv.description, self.convert_dest, self.convert_metavar)
        if self.backfill_texts is not None:
            self.add_backfill(sub, self.backfill_texts)
        return parser

    def app(self, s: WatchSettings, collectors: Sequence[Collector]) -> ExporterApp:
        return ExporterApp(
            name=self.name,
            description=self.description,
            probe=None,
            collectors=list(collectors),
            config_text=self.spec.describe(s),
        )

    def serve(self, s: WatchSettings, collectors: Sequence[Collector], unwatched: str) -> int:
        """``serve``: the collectors on /metrics until SIGTERM; ``unwatched`` is logged (a warning)
        when no path is watched."""
        if not s.watch:
            self.log.warning("%s", unwatched)
        self.log.info("watching %s", s.watch or "nothing")
        return serve(self.app(s, collectors), s.web())

    def report(self, command: str, bad: list[str]) -> int:
        """Each bad file's line on stderr, ``<program> <command>: <line>``; 1 if there is one."""
        for line in bad:
            print(f"{self.name} {command}: {escape_text(line) if self.escape_names else line}", file=sys.stderr)
        return 1 if bad else 0

    @staticmethod
    def exposition(collector: Collector) -> None:
        """``convert``: the exposition of ``collector`` (which must not poll again) on stdout."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        sys.stdout.write(generate_latest(registry).decode())

    def add_backfill(self, sub: Any, texts: Texts) -> None:
        """The ``backfill`` command: files, ``--format``, ``--output``, ``--tsdb``, and the
        exporter's flags but for the watch ones."""
        b = sub.add_parser("backfill", help=texts.help, description=texts.description)
        b.add_argument("files", nargs="+", metavar="FILE")
        b.add_argument(
            "--format",
            choices=FORMATS,
            default="openmetrics",
            help="openmetrics (promtool) or prometheus (VictoriaMetrics import) (default: %(default)s)",
        )
        b.add_argument("--output", metavar="FILE", help="write here instead of stdout")
        b.add_argument(
            "--tsdb",
            metavar="DIR",
            help="also run `promtool tsdb create-blocks-from openmetrics` into DIR (Prometheus' data "
            "directory, or a directory to copy from); needs --output and --format openmetrics",
        )
        self.spec.add_args(b, watch=False)

    def backfill(self, args: argparse.Namespace, write: Callable[[], tuple[int, list[str]]]) -> int:
        """``backfill``: ``write()`` writes the samples (to :func:`output` of ``args.output``) and
        returns how many and the bad files' lines; these are reported, and with ``--tsdb`` the
        file is handed to ``promtool``. 1 if a file was bad or promtool (or the output) failed."""
        if args.tsdb and (not args.output or args.format != "openmetrics"):
            raise ConfigError(None, "--tsdb", "needs --output FILE and --format openmetrics (promtool reads a file)")
        try:
            count, bad = write()
            code = self.report("backfill", bad)
            if args.tsdb and count:
                proc = subprocess.run(
                    ["promtool", "tsdb", "create-blocks-from", "openmetrics", args.output, args.tsdb],
                    capture_output=True,
                    text=True,
                )
                if proc.returncode != 0:
                    print(f"{self.name} backfill: promtool failed: {proc.stderr.strip()}", file=sys.stderr)
                    return 1
                self.log.info("backfilled %d samples into %s", count, args.tsdb)
            return code
        except FileNotFoundError as exc:  # promtool (--tsdb), or --output's directory
            self.log.error("cannot run %s: %s", exc.filename, exc.strerror)
            return 1

    def main(
        self,
        argv: Sequence[str] | None,
        settings: type[WatchSettings] | Callable[[argparse.Namespace], WatchSettings],
        serve: Handler,
        convert: Callable[[Any, list[str]], int],
        run: Callable[[Any, list[str], str | None, float], int] | None = None,
        backfill: Callable[[Any, argparse.Namespace], tuple[int, list[str]]] | None = None,
    ) -> int:
        """Parse ``argv`` (``serve`` when it names no command), read the settings (``settings``:
        the exporter's settings class, read by its spec, or a function of the arguments) and run the
        command's handler: ``convert``'s is given the paths named, ``run``'s the command, the
        ``--run.output`` file and ``--run.linger`` in seconds, ``backfill``'s writes the samples
        (:meth:`backfill`); the exit code as
        :meth:`~ioparallax.exporters.common.watchconfig.WatchSpec.main` says."""

        def dispatch(args: argparse.Namespace) -> int:
            s = self.spec.read(args, settings()) if isinstance(settings, type) else settings(args)
            if args.command == "convert":
                return convert(s, getattr(args, self.convert_dest))
            if args.command == "backfill" and backfill is not None:
                return self.backfill(args, lambda: backfill(s, args))
            if args.command == "run" and run is not None:
                command, linger_s = command_of(args, self.run_texts.tool if self.run_texts else "")
                return run(s, command, args.run_output, linger_s)
            return serve(s, args)

        return self.spec.main(argv, self.build_parser, self.commands, dispatch)


@contextlib.contextmanager
def output(path: str | None) -> Iterator[TextIO]:
    """The file ``path`` opened for writing, or stdout when there is none."""
    if not path:
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8") as fh:
        yield fh
