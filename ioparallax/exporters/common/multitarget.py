"""What the network exporters (Stargate, vCenter, Prism) run the same way: the pool of targets a
``/probe?target=`` reaches, their flags, and ``main()`` (``serve``, ``--replay``, and the ``capture``
and ``replay`` commands).

Each exporter keeps what is its own: its ``Target`` (session, caches, counters) and how a probe of
it is rendered (a :class:`TargetPool` subclass in its ``cli.py``), its config schema
(``config.py``), its collector switches and its capture (``capture.py``). Where its start-up
differs (Stargate: an allow-list of patterns and no credentials, parse workers, Prism names) it
overrides :class:`Program`'s hooks: :meth:`Program.configure`, :meth:`Program.replay_config`,
:meth:`Program.warn`, :meth:`Program.started`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ioparallax.exporters.common.capture import CaptureError
from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.exporters.common.targets import Names
from ioparallax.exporters.common.web.app import BadRequest, ExporterApp, Probe
from ioparallax.exporters.common.web.startup import serve, web_settings
from ioparallax.version import add_version_arg
from ioparallax.yamlconf import ConfigError


class TargetPool:
    """The Target objects by normalised key, created on first probe and kept until the target is
    not probed for the config's ``session_idle_timeout``, then closed (a background reaper), so an
    abandoned target or spelling holds no session.

    A subclass sets :attr:`names` (its config's) and :attr:`target_key`, makes a target
    (:meth:`new_target`), says what a probe did (:meth:`details`) and renders its answer
    (:meth:`render`); one whose targets keep no state (Stargate) answers :meth:`probe` itself."""

    names = Names("targets", "EXPORTER", "exporter")  # the reaper thread, the logger, the flags
    #: The landing page: what the exporter serves, and the target its example links probe when
    #: the config lists none.
    description = ""
    example_target = "target.example.com"
    #: How a dropped target is logged (key, idle seconds).
    drop_message = "dropping target=%s: not probed for %.0fs (session_idle_timeout)"

    def __init__(self, config: Any, client_factory: Callable[..., Any] | None = None):
        self.config = config
        self.client_factory = client_factory  # None: the exporter's own client (--replay: a capture)
        self.exporter = self.names.exporter
        self.log = logging.getLogger(f"ioparallax.exporters.{self.exporter}")
        self._targets: dict[str, Any] = {}
        self._last_probe: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    def target_key(self, name: str) -> str:
        """The normalised key of a ``?target=`` value; ValueError saying why it is not one."""
        raise NotImplementedError

    def new_target(self, key: str, cfg: Any) -> Any:
        raise NotImplementedError

    def probe_target(self, target: Any, timeout: float) -> tuple[Any, Any]:
        """(the snapshot of one probe of ``target``, anything else its rendering needs)."""
        return target.probe(timeout), None

    def details(self, snap: Any, extra: Any) -> str:
        """What a probe that was up did, for its debug line (``requests=3 new_samples=12``)."""
        return ""

    def render(self, name: str, snap: Any, extra: Any, duration: float) -> bytes:
        """The exposition of one probe of target ``name``."""
        raise NotImplementedError

    def probe(self, probe: Probe) -> bytes:
        """``/probe``: the target of ``?target=`` (BadRequest: it may not be probed) probed within
        the scrape's time, one debug line when it is up and one warning with the cause when not."""
        start = time.monotonic()
        target = self.get(probe.target)
        snap, extra = self.probe_target(target, probe.remaining())
        duration = time.monotonic() - start
        if snap.up:
            self.log.debug("probe target=%s up=1 duration=%.3fs %s", probe.target, duration, self.details(snap, extra))
        else:
            self.log.warning("probe failed target=%s kind=%s cause=%s", probe.target, snap.kind, snap.cause)
        return self.render(probe.target, snap, extra, duration)

    @classmethod
    def make_app(
        cls, config: Any, default_timeout: float = 10.0, client_factory: Callable[..., Any] | None = None
    ) -> tuple[ExporterApp, Any]:
        """(the routes, the target pool) of ``config``; ``client_factory``: what reaches a target
        (default: the exporter's client; ``--replay``: a capture)."""
        targets = cls(config, client_factory)
        return targets.app(default_timeout), targets

    def app(self, default_timeout: float = 10.0) -> ExporterApp:
        """The exporter's routes, probing these targets."""
        return ExporterApp(
            name=f"{self.exporter}-exporter",
            description=self.description,
            probe=self.probe,
            default_timeout=default_timeout,
            example_target=next(iter(self.config.targets), self.example_target),
            config_text=self.config.describe(),
        )

    def resolve(self, name: str) -> tuple[str, Any]:
        """(key, settings) of a ?target= value, or BadRequest (HTTP 400) with the reason and a log
        line, before any connection is made: a malformed target, or one not listed."""
        try:
            key = self.target_key(name)
        except ValueError as exc:
            self.log.warning("probe refused target=%r reason=%s", name, exc)
            raise BadRequest(f"bad target: {exc}") from None
        cfg = self.config.target(key)
        if cfg is None:
            reason = self.config.refusal(key)
            self.log.warning("probe refused target=%r reason=%s", name, reason)
            raise BadRequest(f"unknown target {name!r}: {reason}")
        return key, cfg

    def get(self, name: str) -> Any:
        key, cfg = self.resolve(name)
        with self._lock:
            self._last_probe[key] = time.monotonic()
            t = self._targets.get(key)
            if t is None:
                t = self._targets[key] = self.new_target(key, cfg)
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap_loop, name=f"{self.exporter} session reaper", daemon=True
                )
                self._reaper.start()
            return t

    def _reap_loop(self) -> None:
        period = min(30.0, max(0.2, self.config.session_idle_timeout / 4))
        while not self._stop.wait(period):
            self.close_idle()

    def close_idle(self, now: float | None = None) -> list[str]:
        """Close the targets not probed for session_idle_timeout (probes still running are left
        alone); returns their keys."""
        now = time.monotonic() if now is None else now
        idle = self.config.session_idle_timeout
        closing = []
        with self._lock:
            for key, t in list(self._targets.items()):
                if now - self._last_probe.get(key, now) >= idle and not t.busy():
                    closing.append((key, self._targets.pop(key)))
                    self._last_probe.pop(key, None)
        for key, t in closing:
            self.log.info(self.drop_message, key, idle)
            t.close()
        return [key for key, _ in closing]

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            targets, self._targets = list(self._targets.values()), {}
        for t in targets:
            t.close()


# -- flags -----------------------------------------------------------------------------------------


def exporter_parser(names: Names, description: str | None, epilog: str) -> argparse.ArgumentParser:
    """The parser of ``<exporter>-exporter``: ``description`` and ``epilog`` shown as written."""
    return argparse.ArgumentParser(
        prog=f"{names.exporter}-exporter",
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def credentials_epilog(names: Names, target_metavar: str, answers: str) -> str:
    """The end of ``--help`` of an exporter that sends credentials: where they come from, the
    allow-list, TLS, and its ``capture`` (of ``answers``, the "JSON answers") and ``replay``
    commands (``target_metavar``: the example ``--target``, ``PRISM``)."""
    n, program = names, f"{names.exporter}-exporter"
    return (
        "Credentials: per target in --config.file (password_env names an environment variable), or "
        f"{n.prefix}_USERNAME/{n.prefix}_PASSWORD for the targets listed with --{n.exporter}.target or "
        f"{n.prefix}_TARGETS. Credentials are only sent to listed targets: any other ?target= is refused "
        f"with HTTP 400 unless --{n.exporter}.allow-unlisted-targets (or allow_unlisted_targets: true) is "
        "given. TLS certificates are verified unless a target sets insecure_skip_verify: true (or its "
        f"alias tls_verify: false). Commands: `{program} capture --target {target_metavar} -o capture.tar.gz` "
        f"(the {answers} of one probe, anonymized, to report an answer the exporter misreads), "
        f"`{program} replay capture.tar.gz` (its metrics). See docs/{n.exporter}.md."
    )


def add_target_args(
    p: argparse.ArgumentParser,
    names: Names,
    what: str,
    config_help: str,
    idle_help: str | None,
    target_help: str | None = None,
    allow_help: str | None = None,
    metavar: str = "HOST[:PORT]",
) -> None:
    """``--config.file`` and the allow-list flags: ``--<exporter>.target``,
    ``--<exporter>.allow-unlisted-targets`` and, with ``idle_help`` (an exporter that keeps
    sessions), ``--<exporter>.session-idle-timeout`` (``what``: "a vCenter"). ``target_help`` and
    ``allow_help`` replace the help of an exporter that sends no credentials."""
    p.add_argument("--config.file", dest="config_file", default=None, help=config_help)
    p.add_argument(
        f"--{names.exporter}.target",
        dest="targets",
        action="append",
        default=[],
        metavar=metavar,
        help=target_help
        or f"{what} that may be probed (repeatable; also {names.prefix}_TARGETS, comma-separated); it gets the "
        f"default credentials ({names.prefix}_USERNAME/{names.prefix}_PASSWORD or the config file's defaults)",
    )
    p.add_argument(
        f"--{names.exporter}.allow-unlisted-targets",
        dest="allow_unlisted",
        action="store_true",
        help=allow_help
        or "probe any ?target= with the default credentials: anyone who can reach the exporter can "
        "then make it send them to a host of their choice (logged as a warning at start-up)",
    )
    if idle_help is not None:
        p.add_argument(
            f"--{names.exporter}.session-idle-timeout",
            dest="session_idle_timeout",
            type=float,
            default=None,
            metavar="SECONDS",
            help=f"{idle_help} (default: session_idle_timeout in the config file, else 600)",
        )


def add_probe_args(p: argparse.ArgumentParser, replay_help: str) -> None:
    """``--probe.default-timeout``, ``--replay``, the logging flags and ``--version``."""
    p.add_argument(
        "--probe.default-timeout",
        dest="default_timeout",
        type=float,
        default=10.0,
        help="seconds a probe may take when Prometheus sends no scrape timeout header (default: %(default)s)",
    )
    p.add_argument("--replay", metavar="CAPTURE", default=None, help=replay_help)
    add_logging_args(p)
    add_version_arg(p)


# -- main ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Program:
    """One multi-target exporter's ``main()``: its parts."""

    pool: type[TargetPool]
    build_parser: Callable[[], argparse.ArgumentParser]
    #: config file, ``extra_targets=``, ``allow_unlisted=``, ``session_idle_timeout=`` and the
    #: ``switches`` -> the config (ConfigError or ValueError: a mistake in them)
    load_config: Callable[..., Any]
    default_listen: str
    switches: tuple[str, ...] = ("latest_samples",)  # collector flags (their dests) for load_config
    replay_switches: tuple[str, ...] = ()  # ... and for replay_setup

    @property
    def names(self) -> Names:
        return self.pool.names

    @property
    def capture_module(self) -> str:
        """The exporter's ``capture.py``: its ``capture_main``, ``replay_main`` and
        ``replay_setup(path, **replay_switches)`` (the config and client factory of ``--replay
        CAPTURE``; CaptureError: not a capture), imported when a command asks for it."""
        return f"ioparallax.exporters.{self.names.exporter}.capture"

    @property
    def log(self) -> logging.Logger:
        return logging.getLogger(f"ioparallax.exporters.{self.names.exporter}")

    def main(self, argv: Sequence[str] | None = None) -> int:
        argv = list(sys.argv[1:] if argv is None else argv)
        if argv[:1] in (["capture"], ["replay"]):
            capture = importlib.import_module(self.capture_module)
            return capture.capture_main(argv[1:]) if argv[0] == "capture" else capture.replay_main(argv[1:])
        args = self.build_parser().parse_args(argv)
        setup_logging(args.log_level, args.log_format)
        try:
            config, factory = self.replay_config(args) if args.replay else (self.configure(args), None)
        except CaptureError as exc:
            self.log.error("--replay: %s", exc)
            return 2
        except (ConfigError, ValueError) as exc:
            self.log.error("configuration error: %s", exc)
            return 2
        if not args.replay:
            self.warn(config)
        app, targets = self.pool.make_app(config, args.default_timeout, factory)
        self.started(config, args)
        return self._serve(app, targets, args)

    # -- hooks ---------------------------------------------------------------------------------
    def configure(self, args: argparse.Namespace) -> Any:
        """The config of the flags and ``--config.file`` (ConfigError or ValueError: a mistake)."""
        return self.load_config(
            args.config_file,
            extra_targets=args.targets,
            allow_unlisted=True if args.allow_unlisted else None,
            session_idle_timeout=args.session_idle_timeout,
            **_flags(args, self.switches),
        )

    def replay_config(self, args: argparse.Namespace) -> tuple[Any, Callable[..., Any] | None]:
        """(the config, the client factory) of ``--replay CAPTURE``: CaptureError, not a capture."""
        capture = importlib.import_module(self.capture_module)
        config, factory = capture.replay_setup(args.replay, **_flags(args, self.replay_switches))
        return config, factory

    def started(self, config: Any, args: argparse.Namespace) -> None:
        """The start-up's last log line, before serving."""
        if args.replay:
            self.log.info("replaying %s: probe target=%s", args.replay, next(iter(config.targets)))
        else:
            self.log.info("%d targets configured", len(config.targets))

    def warn(self, config: Any) -> None:
        """Warnings on the config (not of a replay): unlisted targets allowed, credentials in clear."""
        if config.allow_unlisted:
            self.log.warning(
                "unlisted targets are allowed: any ?target= receives the default credentials "
                "(user %s); list the %s instead (--%s.target or targets: in the config file)",
                config.defaults.username or "(none)",
                self.names.what,
                self.names.exporter,
            )
        for name, t in config.targets.items():
            if getattr(t, "scheme", "https") == "http" and t.password:
                self.log.warning("target %s uses plain http: its credentials cross the network in clear text", name)

    def _serve(self, app: ExporterApp, targets: TargetPool, args: argparse.Namespace) -> int:
        try:
            return serve(app, web_settings(args, self.default_listen))
        finally:
            targets.close()


def _flags(args: argparse.Namespace, dests: Sequence[str]) -> dict[str, Any]:
    return {dest: getattr(args, dest) for dest in dests}
