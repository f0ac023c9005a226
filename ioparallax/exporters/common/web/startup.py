"""Start-up: the ``--web.*`` flags and the one path the CLIs share (:func:`serve`)."""

from __future__ import annotations

import argparse
import errno
import logging
import math
import signal
import socket
import ssl
import threading
from dataclasses import dataclass

from ioparallax.exporters.common.web.app import (
    DEFAULT_TIMEOUT_OFFSET,
    MAX_SCRAPE_TIMEOUT_SECONDS,
    ExporterApp,
    StartupError,
)
from ioparallax.exporters.common.web.server import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_READ_HEADER_TIMEOUT,
    ExporterServer,
    ServerLimits,
    parse_listen_address,
)
from ioparallax.exporters.common.webconfig import load_web_config
from ioparallax.units import parse_duration
from ioparallax.version import version_line
from ioparallax.yamlconf import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebSettings:
    listen: str
    config_file: str | None = None
    timeout_offset: float = DEFAULT_TIMEOUT_OFFSET
    limits: ServerLimits = ServerLimits()


def listen_help(default_listen: str) -> str:
    port = default_listen.rpartition(":")[2]
    return (
        f"address to serve on (default: {default_listen}, i.e. every interface, IPv4 and IPv6: anyone who "
        f"can reach this host can scrape it; restrict it with --web.listen-address=127.0.0.1:{port} and "
        "protect it with --web.config.file)"
    )


def add_web_args(parser: argparse.ArgumentParser, default_listen: str, probe: bool = True) -> None:
    """--web.listen-address (left None when not given, so a config file can set it),
    --web.config.file and, for exporters with /probe, --web.timeout-offset."""
    parser.add_argument(
        "--web.listen-address", dest="listen", default=None, metavar="[HOST]:PORT", help=listen_help(default_listen)
    )
    parser.add_argument(
        "--web.config.file",
        dest="web_config_file",
        default=None,
        metavar="FILE",
        help="exporter-toolkit web config (YAML): tls_server_config (cert_file, key_file, "
        "client_auth_type, client_ca_file, min_version) for HTTPS and basic_auth_users "
        "(user: bcrypt hash) for basic auth on every route; read at start-up",
    )
    parser.add_argument(
        "--web.read-header-timeout",
        dest="read_header_timeout",
        type=_duration_arg,
        default=DEFAULT_READ_HEADER_TIMEOUT,
        metavar="DURATION",
        help="time a client has to send a request's line and headers, in all; a slower client is "
        f"disconnected (default: {DEFAULT_READ_HEADER_TIMEOUT:g}s)",
    )
    parser.add_argument(
        "--web.idle-timeout",
        dest="idle_timeout",
        type=_duration_arg,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="DURATION",
        help="time a kept-alive connection may wait for its next request before it is closed "
        f"(default: {DEFAULT_IDLE_TIMEOUT:g}s)",
    )
    parser.add_argument(
        "--web.max-connections",
        dest="max_connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help="connections served at once; past it a new connection is closed at once (plain HTTP: "
        "after a 503 answer) and a warning logged (default: %(default)s)",
    )
    if probe:
        parser.add_argument(
            "--web.timeout-offset",
            dest="timeout_offset",
            type=float,
            default=DEFAULT_TIMEOUT_OFFSET,
            metavar="SECONDS",
            help="a probe ends this long before Prometheus' scrape timeout (from the "
            "X-Prometheus-Scrape-Timeout-Seconds header, taken as at most "
            f"{MAX_SCRAPE_TIMEOUT_SECONDS:g} s) (default: %(default)s)",
        )


def _duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def server_limits(args: argparse.Namespace) -> ServerLimits:
    """ServerLimits from add_web_args' flags (defaults for those a parser does not have)."""
    return ServerLimits(
        read_header_timeout=getattr(args, "read_header_timeout", DEFAULT_READ_HEADER_TIMEOUT),
        idle_timeout=getattr(args, "idle_timeout", DEFAULT_IDLE_TIMEOUT),
        max_connections=getattr(args, "max_connections", DEFAULT_MAX_CONNECTIONS),
    )


def web_settings(args: argparse.Namespace, listen: str) -> WebSettings:
    """WebSettings from add_web_args' flags; ``listen`` is used when --web.listen-address is not given."""
    return WebSettings(
        listen=getattr(args, "listen", None) or listen,
        config_file=getattr(args, "web_config_file", None),
        timeout_offset=getattr(args, "timeout_offset", DEFAULT_TIMEOUT_OFFSET),
        limits=server_limits(args),
    )


_BIND_ERRORS: dict[int | None, str] = {
    errno.EADDRINUSE: "the port is already in use (another process listens on it)",
    errno.EADDRNOTAVAIL: "the address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def start_server(app: ExporterApp, settings: WebSettings) -> ExporterServer:
    """Check the settings, read the web config and bind; StartupError (exit 2 for a configuration
    mistake, 1 when the address cannot be listened on) with one line saying why."""
    if not (math.isfinite(settings.timeout_offset) and settings.timeout_offset >= 0):
        raise StartupError(f"--web.timeout-offset: expected seconds >= 0, got {settings.timeout_offset}", 2)
    if not (math.isfinite(app.default_timeout) and app.default_timeout > 0):
        raise StartupError(f"--probe.default-timeout: expected seconds > 0, got {app.default_timeout}", 2)
    settings.limits.check()
    try:
        host, port = parse_listen_address(settings.listen)
    except ValueError as exc:
        raise StartupError(f"--web.listen-address: {exc}", 2) from None
    try:
        web = load_web_config(settings.config_file)
    except ConfigError as exc:
        raise StartupError(f"--web.config.file: {exc}", 2) from None
    app.timeout_offset = settings.timeout_offset
    try:
        return ExporterServer(app, host, port, web, settings.limits)
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on {settings.listen}: cannot resolve {host!r}: {exc.strerror}") from None
    except (OSError, ssl.SSLError) as exc:
        cause = _BIND_ERRORS.get(exc.errno) or getattr(exc, "strerror", None) or str(exc)
        raise StartupError(f"cannot listen on {settings.listen}: {cause}") from None


def serve(app: ExporterApp, settings: WebSettings) -> int:
    """Start the server, serve until SIGTERM or Ctrl-C, stop; the process' exit code.
    Start-up failures are one error line in the log (no traceback)."""
    try:
        server = start_server(app, settings)
    except StartupError as exc:
        log.error("cannot start: %s", exc)
        return exc.exit_code
    log.info("listening on %s; %s", server.describe(), version_line(app.name))
    if server.web.basic_auth_users and server.web.tls is None:
        log.warning("basic auth without tls_server_config: passwords cross the network in clear text")
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
