"""The settings and ``main()`` of the watch-directory exporters (fio, DiskSPD, vdbench, esxtop,
pgbench), one way.

Each of them takes its settings from flags, a ``--config.file`` YAML file and defaults, in that
order of precedence; most settings are the same in all of them (``listen_address``, ``watch``,
``retention``, ``cache_size``, ``scrape_interval``). An exporter describes its own settings as
:class:`Option` rows in a :class:`WatchSpec` (its ``config.py``, with its default listen address);
this module adds the flags to argparse, reads and checks the file (unknown keys refused) and the
flags, and raises a :class:`~ioparallax.yamlconf.ConfigError` naming the file and the key, or the
flag, of a bad value.

:meth:`WatchSpec.main` runs a command line: ``serve`` when no command is named, one error line
and exit 2 for a configuration mistake, 1 when the exporter cannot start.

An exporter's own flags keep their own argparse ``dest`` (``<prefix>_<key>``, such as
``fio_idle_timeout``), so they never meet the ``--web.*`` flags' (``--web.idle-timeout`` is
``idle_timeout``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ioparallax.exporters.common.hygiene import HygieneConfig
from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.exporters.common.web.app import StartupError
from ioparallax.exporters.common.web.server import ServerLimits, parse_listen_address
from ioparallax.exporters.common.web.startup import WebSettings, add_web_args, server_limits
from ioparallax.units import parse_bytes, parse_duration
from ioparallax.version import add_version_arg
from ioparallax.yamlconf import ConfigError, Section, load_yaml


@dataclass
class WatchSettings:
    """What every watch exporter has; an exporter's settings class adds its own fields (and
    sets its own defaults by declaring a field again)."""

    listen: str = ""  # "" until read: the exporter's WatchSpec.default_listen
    web_config_file: str | None = None
    web_limits: ServerLimits = field(default_factory=ServerLimits)
    watch: list[str] = field(default_factory=list)
    retention_s: float = 900.0
    cache_size: int | None = None
    scrape_interval_s: float = 15.0

    def web(self) -> WebSettings:
        return WebSettings(listen=self.listen, config_file=self.web_config_file, limits=self.web_limits)

    def hygiene(self) -> HygieneConfig:
        """The hygiene checks' settings these say: the storage cache size and the scrape interval."""
        return HygieneConfig(cache_size_bytes=self.cache_size, scrape_interval_s=self.scrape_interval_s)


S = TypeVar("S", bound=WatchSettings)


def show_seconds(value: float) -> str:
    return f"{value:g}s"


def show_size(value: int | None) -> str:
    """A size whose check is off while it is unset (the storage cache, pgbench's server memory)."""
    return str(value) if value is not None else "unset (check off)"


def positive(value: float) -> str | None:
    """A check: a duration that must be above 0."""
    return None if value > 0 else "must be positive"


@dataclass(frozen=True)
class Option:
    """One setting: the YAML ``key`` (also its name on the landing page), the settings
    ``attr`` it sets, and its flag.

    ``parse`` reads both the file's value and the flag's: a type (``str``, ``bool``) is checked
    as it is in the file and converts the flag's text; a function (``parse_duration``) converts
    both and raises ValueError with what is wrong. ``check`` returns an error message for a
    parsed value that is out of range, or None.
    """

    key: str
    attr: str
    parse: Callable[[Any], Any]
    flag: str
    metavar: str | None = None
    help: str = ""
    boolean: bool = False  # --flag / --no-flag
    watch_only: bool = False  # only on the commands that watch (serve, run), not on convert
    group: str | None = None  # an argparse group of its own (default: the exporter's)
    check: Callable[[Any], str | None] | None = None
    show: Callable[[Any], str] = str
    listed: bool = True  # shown on the landing page


@dataclass(frozen=True)
class WatchSpec:
    """One watch exporter's settings: its name, flag prefix and options (in --help order)."""

    program: str  # fio-exporter
    prefix: str  # fio: flags --fio.*
    default_listen: str  # --web.listen-address when neither a flag nor the file says (":9763")
    group: str  # the title of the flags' group in --help
    watch_help: str
    watch_metavar: str
    options: Sequence[Option]

    def dest(self, option: Option) -> str:
        return f"{self.prefix}_{option.key}"

    @property
    def watch_flag(self) -> str:
        return f"--{self.prefix}.watch"

    def add_args(self, p: argparse.ArgumentParser, watch: bool = True) -> None:
        add_watch_args(p, self, watch)

    def parser(
        self, description: str, commands: Sequence[str], serve_help: str, serve_description: str
    ) -> tuple[argparse.ArgumentParser, Any]:
        """The exporter's argument parser (with --version) and its subparsers (``commands``), with
        ``serve`` added (the web flags and the watch flags); the caller adds the other commands."""
        parser = argparse.ArgumentParser(prog=self.program, description=description)
        add_version_arg(parser)
        sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(commands) + "}")
        serve = sub.add_parser("serve", help=serve_help, description=serve_description)
        add_web_args(serve, self.default_listen, probe=False)
        self.add_args(serve)
        return parser, sub

    def add_convert(self, sub: Any, help: str, description: str, dest: str, metavar: str) -> None:
        """The ``convert`` command: the exposition of the files (or directories) named once, read
        with the exporter's flags but for the watch ones."""
        conv = sub.add_parser("convert", help=help, description=description)
        conv.add_argument(dest, nargs="+", metavar=metavar)
        self.add_args(conv, watch=False)

    def read(self, args: argparse.Namespace, defaults: S) -> S:
        """``defaults`` (the exporter's settings object) filled from the flags and the file."""
        return read_settings(args, self, defaults)

    def describe(self, s: WatchSettings) -> str:
        return describe(self, s)

    def main(
        self,
        argv: Sequence[str] | None,
        build_parser: Callable[[], argparse.ArgumentParser],
        commands: Sequence[str],
        run: Callable[[argparse.Namespace], int],
    ) -> int:
        """Parse ``argv`` (``serve`` when it names none of ``commands``), set up logging and
        ``run`` the command; the exit code: 2 for a configuration mistake, 1 (or the
        StartupError's) when the exporter cannot start, each with one log line."""
        log = logging.getLogger(f"ioparallax.exporters.{self.prefix}")
        argv = list(sys.argv[1:] if argv is None else argv)
        if not argv or argv[0] not in (*commands, "-h", "--help", "--version"):
            argv.insert(0, "serve")
        args = build_parser().parse_args(argv)
        setup_logging(args.log_level, args.log_format)
        try:
            return run(args)
        except ConfigError as exc:
            log.error("configuration error: %s", exc)
            return 2
        except StartupError as exc:
            log.error("cannot start: %s", exc)
            return exc.exit_code
        except BrokenPipeError:
            raise  # stdout closed by its reader (| head): quiet_on_closed_stdout ends quietly
        except (OSError, ValueError) as exc:
            log.error("cannot start: %s", exc)
            return 1


# -- the options they share (help texts differ a little, so each passes its own) ----------------


def idle_timeout_option(prefix: str, help: str, check: Callable[[Any], str | None] | None = None) -> Option:
    """How long a file (or directory) must not grow to be a finished run."""
    return Option(
        "idle_timeout",
        "idle_s",
        parse_duration,
        f"--{prefix}.idle-timeout",
        "DURATION",
        help,
        check=check,
        show=show_seconds,
    )


def retention_option(prefix: str, help: str, watch_only: bool = False) -> Option:
    return Option(
        "retention",
        "retention_s",
        parse_duration,
        f"--{prefix}.retention",
        "DURATION",
        help,
        watch_only=watch_only,
        show=show_seconds,
    )


def cache_size_option(prefix: str) -> Option:
    return Option(
        "cache_size",
        "cache_size",
        parse_bytes,
        f"--{prefix}.cache-size",
        "SIZE",
        "storage cache size for the working-set hygiene check, e.g. 20GiB (default: unset, check off)",
        show=show_size,
    )


def scrape_interval_option(prefix: str, flagged: str = "runs shorter than 3 of these are flagged") -> Option:
    return Option(
        "scrape_interval",
        "scrape_interval_s",
        parse_duration,
        f"--{prefix}.scrape-interval",
        "DURATION",
        f"Prometheus' scrape interval: {flagged} (default: 15s)",
        check=positive,
        show=show_seconds,
    )


def at_least_1kib(what: str) -> Callable[[int], str | None]:
    """A check for a largest-document size: ``what`` says why (the tool's smallest document)."""
    return lambda v: None if v >= 1024 else f"must be at least 1KiB ({what})"


# -- argparse ------------------------------------------------------------------------------------


def add_watch_args(p: argparse.ArgumentParser, spec: WatchSpec, watch: bool = True) -> None:
    """The exporter's flags (``watch``: also the watched paths and the watch-only options),
    --config.file, the logging flags and --version."""
    main = p.add_argument_group(spec.group)
    groups: dict[str | None, Any] = {None: main}
    if watch:
        main.add_argument(
            spec.watch_flag,
            dest=f"{spec.prefix}_watch",
            action="append",
            metavar=spec.watch_metavar,
            help=spec.watch_help,
        )
    for o in spec.options:
        if o.watch_only and not watch:
            continue
        g = groups.get(o.group)
        if g is None:
            g = groups[o.group] = p.add_argument_group(o.group)
        if o.boolean:
            g.add_argument(o.flag, dest=spec.dest(o), action=argparse.BooleanOptionalAction, default=None, help=o.help)
        else:
            g.add_argument(o.flag, dest=spec.dest(o), metavar=o.metavar, help=o.help)
    keys = ", ".join(["listen_address", "watch", *(o.key for o in spec.options)])
    p.add_argument(
        "--config.file",
        dest="config_file",
        metavar="FILE",
        help=f"YAML file with the same settings (keys: {keys}); flags given on the command line win",
    )
    add_logging_args(p)
    add_version_arg(p, spec.program)


# -- flags over the file over defaults -----------------------------------------------------------


def read_settings(args: argparse.Namespace, spec: WatchSpec, s: S) -> S:
    """Fill ``s`` (defaults) from the --config.file and then the flags; check the values.
    Errors name the file and the key, or the flag."""
    s.listen = s.listen or spec.default_listen
    cfg_path = getattr(args, "config_file", None)
    if cfg_path:
        sec = Section(load_yaml(cfg_path), cfg_path)
        s.listen = sec.get("listen_address", str, default=s.listen)
        watch = sec.get("watch", (list, str), default=[])
        s.watch = [watch] if isinstance(watch, str) else [str(w) for w in watch]
        for o in spec.options:
            setattr(s, o.attr, sec.get(o.key, o.parse, default=getattr(s, o.attr)))
        sec.reject_unknown()

    def flag(attr: str, parse: Callable[[Any], Any], dest: str, shown: str) -> bool:
        value = getattr(args, dest, None)
        if value is None:
            return False
        try:
            setattr(s, attr, parse(value))
        except ValueError as exc:
            raise ConfigError(None, shown, str(exc)) from exc
        return True

    listen_from_flag = flag("listen", str, "listen", "--web.listen-address")
    flag("web_config_file", str, "web_config_file", "--web.config.file")
    s.web_limits = server_limits(args)
    watched = getattr(args, f"{spec.prefix}_watch", None)
    if watched:
        s.watch = list(watched)
    from_flag = {o.key for o in spec.options if flag(o.attr, o.parse, spec.dest(o), o.flag)}
    for o in spec.options:
        problem = o.check(getattr(s, o.attr)) if o.check else None
        if problem:
            raise ConfigError(None, o.flag, problem) if o.key in from_flag else ConfigError(cfg_path, o.key, problem)
    try:
        parse_listen_address(s.listen)
    except ValueError as exc:
        if listen_from_flag:
            raise ConfigError(None, "--web.listen-address", str(exc)) from exc
        raise ConfigError(cfg_path, "listen_address", str(exc)) from exc
    return s


def describe(spec: WatchSpec, s: WatchSettings) -> str:
    """The settings as the landing page shows them (no secrets: these exporters have none)."""
    lines = [f"listen_address: {s.listen}", f"watch: {s.watch}"]
    lines += [f"{o.key}: {o.show(getattr(s, o.attr))}" for o in spec.options if o.listed]
    return "\n".join(lines)
