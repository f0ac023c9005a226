"""Logging set-up shared by the exporters: one line per event, logfmt-style, on stderr.

Messages carry what clients send (a ``?target=`` value, a user name), so every value is
escaped: in logfmt, per the go-logfmt conventions (a value with a space, ``=``, ``"`` or a
control character is double-quoted; ``\\``, ``"``, newline, CR and tab are backslash escapes and
other control, format and line-separator characters ``\\u00XX``); in the text format, the same
escapes without the quoting. A hostile value can therefore never start a line of its own.
"""

from __future__ import annotations

import logging
import re
import sys

_SIMPLE = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    simple = _SIMPLE.get(ch)
    if simple is not None:
        return simple
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


# Characters escaped in any value: C0/C1 controls (Cc), format characters such as the bidi
# overrides (Cf), Unicode line and paragraph separators (Zl, Zp; U+0085 NEL is Cc), as of Unicode
# 14 (tests/exporters/common/test_logsetup.py checks the set against unicodedata).
UNSAFE_CHARS = (
    "\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd"
    "\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
_UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")
_NEEDS_QUOTES = re.compile(r'[\s="\\]|^$')


def escape_text(value: str) -> str:
    """``value`` with every control, format and line-separator character escaped (the text format)."""
    return _UNSAFE.sub(lambda m: _escape_char(m.group()), value.replace("\\", "\\\\"))


def logfmt_value(value: object) -> str:
    """One logfmt value: bare when it is safe so, else double-quoted with escapes."""
    text = str(value)
    if not _NEEDS_QUOTES.search(text) and not _UNSAFE.search(text):
        return text
    return '"' + _UNSAFE.sub(lambda m: _escape_char(m.group()), text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = (
            f"ts={self.formatTime(record, '%Y-%m-%dT%H:%M:%S')} level={record.levelname.lower()} "
            f"logger={logfmt_value(record.name)} msg={logfmt_value(record.getMessage())}"
        )
        if record.exc_info:
            line += f" exc={logfmt_value(self.formatException(record.exc_info))}"
        return line


class TextFormatter(logging.Formatter):
    """``time level logger: message`` on one line; a traceback follows as ``\\n`` escapes."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        return escape_text(super().format(record))


def setup_logging(level: str = "info", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter() if fmt == "logfmt" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def add_logging_args(parser) -> None:
    parser.add_argument(
        "--log.level",
        dest="log_level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="only log messages with the given severity or above (default: %(default)s)",
    )
    parser.add_argument(
        "--log.format",
        dest="log_format",
        default="logfmt",
        choices=["logfmt", "text"],
        help="output format of log messages (one line per event, values escaped so no "
        "input can start a line; default: %(default)s)",
    )
