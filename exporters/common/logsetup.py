"""Logging set-up shared by the exporters: one line per event, logfmt-style, on stderr."""

from __future__ import annotations

import logging
import sys


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage().replace('"', '\\"')
        line = (f'ts={self.formatTime(record, "%Y-%m-%dT%H:%M:%S")} level={record.levelname.lower()} '
                f'logger={record.name} msg="{msg}"')
        if record.exc_info:
            exc = self.formatException(record.exc_info).replace("\n", "\\n").replace('"', '\\"')
            line += f' exc="{exc}"'
        return line


def setup_logging(level: str = "info", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "logfmt":
        handler.setFormatter(LogfmtFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def add_logging_args(parser) -> None:
    parser.add_argument("--log.level", dest="log_level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="only log messages with the given severity or above (default: %(default)s)")
    parser.add_argument("--log.format", dest="log_format", default="logfmt", choices=["logfmt", "text"],
                        help="output format of log messages (default: %(default)s)")
