"""The one YAML loader of ioparallax: every file the project reads (exporter configs, the web
config, scenarios, the mixin config) goes through :func:`load_yaml`.

A configuration file is small and written by hand, so what YAML allows beyond that is refused
with a :class:`ConfigError` naming the file, the line and, where there is one, the key:

- anchors and aliases (``&a`` / ``*a``): ten lines of nested aliases expand to gigabytes (the
  "billion laughs"); write the value out instead;
- a key given twice in one mapping: PyYAML keeps the last silently, so a second
  ``basic_auth_users:`` would replace the first;
- a file above :data:`MAX_YAML_BYTES`, nesting deeper than :data:`MAX_YAML_DEPTH`, text that is
  not UTF-8, an integer above :data:`MAX_INT_BITS` bits, and a value PyYAML cannot convert
  (``!!int x``, a timestamp in month 13), which raised a bare ValueError.

:class:`Section` reads a loaded mapping into typed values, each error naming the key as a dotted
path (``targets.vc1.port``) beside the file.

Errors never print a whole value: :func:`cut` shortens what they quote, and a ConfigError's message
is cut at :data:`MAX_MESSAGE_CHARS`.
"""

from __future__ import annotations

import os
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar

import yaml

#: Largest configuration file read (bytes). The project's largest (a scenario, a vCenter config
#: with hundreds of targets) are tens of kilobytes; PyYAML holds ~20x the text while parsing.
MAX_YAML_BYTES = 4 * 1024 * 1024

#: Deepest nesting of mappings and lists (the project's files nest 5 levels at most); deeper
#: would exhaust PyYAML's recursion long before it means anything.
MAX_YAML_DEPTH = 50

#: Largest integer read, in bits (sizes in bytes and counts fit in 64).
MAX_INT_BITS = 128

#: A ConfigError's message is cut at this many characters (it is one log line).
MAX_MESSAGE_CHARS = 400


def cut_text(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` if it is at most ``limit`` characters, else its start and how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(limit - 30, 10)
    return f"{text[:keep]}... ({len(text) - keep} more characters)"


_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlevel = 2
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4
_REPR.maxlong = 40


def cut(value: object) -> str:
    """A short repr of a value read from a file, for an error message: strings, lists and
    mappings are shortened (``'aaaa...aaa'``, ``[1, 2, 3, 4, ...]``) without formatting the whole."""
    return cut_text(_REPR.repr(value), 120)


class ConfigError(Exception):
    """A configuration problem, located by file and key (a dotted path such as
    ``targets.vc1.password_env``), so a user can fix the file without reading code."""

    def __init__(self, path: str | os.PathLike[str] | None, key: str | None, message: str):
        self.path = str(path) if path is not None else None
        self.key = cut_text(key, 120) if key else key
        self.message = cut_text(message)
        where = self.path or "<config>"
        if self.key:
            where += f": {self.key}"
        super().__init__(f"{where}: {self.message}")


class _Refused(yaml.YAMLError):
    """Something the loader refuses, with where it is."""

    def __init__(self, mark: Any, message: str, key: str | None = None):
        super().__init__(message)
        self.mark = mark
        self.message = message
        self.key = key


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases and anchors, duplicate keys or deep nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(
                event.start_mark,
                f"YAML alias *{cut_text(str(event.anchor), 40)} is not accepted: write the value out "
                "(aliases let a small file expand to gigabytes)",
            )
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise _Refused(
                event.start_mark,
                f"YAML anchor &{cut_text(str(anchor), 40)} is not accepted: write the value out where it is "
                "used (aliases let a small file expand to gigabytes)",
            )
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(event.start_mark, f"nested more than {MAX_YAML_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # A scalar PyYAML's constructors cannot convert raises ValueError, not a YAMLError: an
        # integer of 5,000 digits (Python's 4,300-digit limit), !!timestamp 2026-13-45, !!int x.
        try:
            value = super().construct_object(node, deep=deep)
        except (ValueError, TypeError, OverflowError) as exc:
            raise _Refused(node.start_mark, f"cannot read this value: {cut_text(str(exc), 120)}") from None
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            # 0x followed by 5,000 digits parses, and then cannot even be printed (str() refuses
            # over 4,300 digits): no setting of the project is a number that large.
            raise _Refused(node.start_mark, f"an integer of {value.bit_length()} bits is beyond any setting")
        return value

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, Any] = {}  # key -> its yaml Mark
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                earlier = first.get(key)
            except TypeError:  # an unhashable key: PyYAML's own error names it
                continue
            if earlier is not None:
                raise _Refused(
                    key_node.start_mark,
                    f"duplicate key (first at line {earlier.line + 1}): a key may appear once in a mapping",
                    key=cut(key) if not isinstance(key, str) else cut_text(key, 80),
                )
            first[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""


def _reader_problem(text: str, exc: yaml.reader.ReaderError) -> str:
    """A character YAML does not allow in a file (NUL, other control characters, DEL), as
    ``line L, column C: ...``: PyYAML's ReaderError has no mark and escaped as a traceback."""
    pos = exc.position if isinstance(exc.position, int) and 0 <= exc.position <= len(text) else 0
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    char = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
    return (
        f"line {line}, column {column}: invalid YAML: the character U+{char:04X} (a control character) is not allowed"
    )


def parse_yaml(text: str, path: str | os.PathLike[str] | None = None) -> Any:
    """Parse YAML text as :func:`load_yaml` does (``path`` only names it in errors)."""
    try:
        loader = _Loader(text)  # the reader refuses control characters here, before any parse
    except yaml.reader.ReaderError as exc:
        raise ConfigError(path, None, _reader_problem(text, exc)) from None
    try:
        return loader.get_single_data()
    except yaml.reader.ReaderError as exc:
        raise ConfigError(path, None, _reader_problem(text, exc)) from None
    except _Refused as exc:
        raise ConfigError(path, exc.key, f"{_where(exc.mark)}{exc.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(path, None, f"invalid YAML{loc}: {cut_text(str(problem), 200)}") from None
    except RecursionError:
        raise ConfigError(path, None, "invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml(path: str | os.PathLike[str], max_bytes: int = MAX_YAML_BYTES, regular_only: bool = False) -> Any:
    """Read and parse a YAML file; a missing or unreadable file, one above ``max_bytes``, text that
    is not UTF-8, invalid YAML and what the loader refuses (see the module) become a ConfigError
    naming the file (and the line, and the key where there is one). ``regular_only``: a FIFO or a
    device is refused rather than waited on or read without end (``open_regular``); configuration
    files leave it off, so that ``--config.file <(...)`` keeps working."""
    from ioparallax.exporters.common.watchdir import open_regular

    try:
        with open_regular(os.fspath(path)) if regular_only else open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(path, None, f"cannot read file: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise ConfigError(path, None, f"larger than {max_bytes // (1024 * 1024)} MiB: not a configuration file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            path, None, f"not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line}): save the file as UTF-8"
        ) from None
    return parse_yaml(text.removeprefix("\ufeff"), path)


# -- reading a loaded file: typed values, errors naming the file and the key ----------------------

T = TypeVar("T")


class Section:
    """A mapping read from a config file that knows where it came from.

    ``Section(data, path, "targets.vc1").get("port", int, default=443)`` raises a
    ConfigError naming ``targets.vc1.port`` when the value has the wrong type.
    Unknown keys are reported by :meth:`reject_unknown`, so typos do not pass silently.
    """

    def __init__(self, data: Any, path: str | os.PathLike[str] | None, key: str = ""):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(path, key or None, f"expected a mapping, got {type(data).__name__}")
        self.data: dict[str, Any] = data
        self.path = path
        self.key = key
        self._seen: set[str] = set()

    def child_key(self, name: str | int) -> str:
        if isinstance(name, int):
            return f"{self.key}[{name}]"
        return f"{self.key}.{name}" if self.key else str(name)

    def error(self, name: str | None, message: str) -> ConfigError:
        return ConfigError(self.path, self.child_key(name) if name is not None else (self.key or None), message)

    _MISSING = object()

    def get(
        self, name: str, kind: type | tuple[type, ...] | Callable[[Any], T] = object, default: Any = _MISSING
    ) -> Any:
        self._seen.add(name)
        if name not in self.data or self.data[name] is None:
            if default is Section._MISSING:
                raise self.error(name, "is required")
            return default
        value = self.data[name]
        if isinstance(kind, type) or isinstance(kind, tuple):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            # bool is an int in Python; a YAML `true` where a number is expected is a mistake.
            if bool not in kinds and isinstance(value, bool) and any(k in (int, float) for k in kinds):
                raise self.error(name, f"expected {_names(kinds)}, got a boolean")
            if float in kinds and isinstance(value, int) and not isinstance(value, bool):
                return float(value)
            if not isinstance(value, kinds):
                raise self.error(name, f"expected {_names(kinds)}, got {type(value).__name__} {cut(value)}")
            return value
        try:
            return kind(value)
        except (ValueError, TypeError, OverflowError) as exc:
            raise self.error(name, str(exc)) from exc

    def section(self, name: str, required: bool = False) -> Section:
        self._seen.add(name)
        if name not in self.data:
            if required:
                raise self.error(name, "is required")
            return Section({}, self.path, self.child_key(name))
        return Section(self.data[name], self.path, self.child_key(name))

    def sections(self, name: str, required: bool = False) -> list[Section]:
        """A list of mappings under ``name``."""
        self._seen.add(name)
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.error(name, "is required")
            return []
        if not isinstance(value, list):
            raise self.error(name, f"expected a list, got {type(value).__name__}")
        key = self.child_key(name)
        return [Section(item, self.path, f"{key}[{i}]") for i, item in enumerate(value)]

    def reject_unknown(self) -> None:
        unknown = sorted(set(self.data) - self._seen)
        if unknown:
            raise self.error(unknown[0], f"unknown key (known: {', '.join(sorted(self._seen)) or 'none'})")


def _names(kinds: tuple[type, ...]) -> str:
    words = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "a boolean",
        list: "a list",
        dict: "a mapping",
    }
    return " or ".join(words.get(k, k.__name__) for k in kinds)
