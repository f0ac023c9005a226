"""Finding the files under watched paths: files named directly, and files matching a glob inside
watched directories (not recursive), shared by the exporters that read tool output from disk
(fio-exporter, diskspd-exporter).

A path that cannot be read is reported, never raised: the caller shows it as down and serves the
rest. File names are whatever bytes the file system holds; :func:`display_name` turns one into
text that any exposition or log line can carry.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable


def list_files(
    paths: list[str], pattern: str, skip_missing: Callable[[str], bool] = lambda _path: False
) -> tuple[list[str], list[str]]:
    """(files found, ``"<path>: <cause>"`` for each watched path that cannot be read).

    Directories are listed in name order; a file both named and inside a watched directory is
    returned once. ``skip_missing(path)`` true: a missing path is not reported (a file another
    process has not created yet)."""
    found: list[str] = []
    missing: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            try:
                names = sorted(os.listdir(path))
            except OSError as exc:
                missing.append(f"{path}: {exc.strerror or exc}")
                continue
            for name in names:
                full = os.path.join(path, name)
                if fnmatch.fnmatch(name, pattern) and os.path.isfile(full):
                    found.append(full)
        elif os.path.exists(path):
            found.append(path)
        elif skip_missing(path):
            continue
        else:
            missing.append(f"{path}: no such file or directory")
    return list(dict.fromkeys(found)), missing


def display_name(path: str) -> str:
    """A file name as UTF-8-safe text: bytes that are not UTF-8 (kept by Python as surrogate
    escapes) become ``\\xNN``, so a label value or log line never fails to encode."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
