"""Finding the files under watched paths: files named directly, and files matching a glob inside
watched directories (not recursive), shared by the exporters that read tool output from disk
(the watch exporters: fio, DiskSPD, vdbench, esxtop, pgbench; see common/watch/).

A path that cannot be read is reported, never raised: the caller shows it as down and serves the
rest. File names are whatever bytes the file system holds; :func:`display_name` turns one into
text that any exposition or log line can carry. :func:`open_regular` opens a file found there
without ever blocking (a FIFO or device is refused, checked on the open descriptor) and, for a
file found inside a watched directory, only if it lies inside that directory: a symbolic link
there that leads outside it is refused (an exporter reads what it was pointed at, not
``/etc/shadow`` because someone who can write into a results directory linked it there), one
that stays inside is followed. A file named directly is read wherever it leads: the user chose it.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import stat
from collections.abc import Callable, Iterator
from typing import BinaryIO, NamedTuple, Protocol

from ioparallax.exporters.common.exposition import printable


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
    escapes) become ``\\xNN``, any other lone surrogate ``\\uXXXX``
    (:func:`ioparallax.exporters.common.exposition.printable`), so a label value or log line
    never fails to encode."""
    return printable(path)


def watched_directory(path: str, paths: list[str]) -> str | None:
    """The watched directory in which :func:`list_files` found ``path``, the one reading it is
    confined to; None for a file named in ``paths`` itself."""
    return None if path in paths else os.path.dirname(path)


def inside(path: str, within: str) -> str:
    """The real path of ``path`` (symbolic links resolved) when it lies inside the directory
    ``within`` (resolved likewise), else an OSError naming where it leads: the source is then
    down with reason ``unreadable``, one log line, like any file that cannot be read."""
    real = os.path.realpath(path)
    root = os.path.realpath(within)
    if not real.startswith(root.rstrip(os.sep) + os.sep):
        raise OSError(
            errno.EPERM,
            f"a symbolic link to {display_name(real)}, outside the watched directory {display_name(root)}: "
            "not followed (only files inside a watched directory are read)",
        )
    return real


def open_regular(path: str, within: str | None = None) -> BinaryIO:
    """Open a regular file for reading; nothing else, and never wait. A FIFO named with
    --fio.watch blocked open() (and so every scrape) until a writer came; a device (/dev/zero)
    would be read without end. So the file is opened non-blocking and its type checked on the
    open descriptor (no window between a check and the open); anything but a regular file is an
    OSError, which makes the source down with reason ``unreadable`` and one log line.

    ``within`` (see :func:`watched_directory`): the file must lie inside that directory once
    symbolic links are resolved (:func:`inside`); the resolved path is opened with O_NOFOLLOW, so
    a link swapped in for the file after the check is refused too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    if within is not None:
        path = inside(path, within)
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({_file_type(mode)}); only regular files are read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return f"file type {stat.S_IFMT(mode):o}"


def why_reread(fh: BinaryIO, identity: tuple[int, int] | None, offset: int, prefix: bytes) -> str | None:
    """Why a followed file must be read again from the start, or None to go on from ``offset``:
    ``fh`` is the file opened again, ``identity`` the (st_dev, st_ino) it had (None before the
    first read) and ``prefix`` its first bytes as read then. A new inode is a rotation, a size
    below ``offset`` a truncation (a tool starting a new run), changed first bytes a rewrite in
    place with content as long or longer. Leaves ``fh``'s position anywhere: seek before reading."""
    st = os.fstat(fh.fileno())
    if identity is not None and (st.st_dev, st.st_ino) != identity:
        return "replaced by a new file"
    if st.st_size < offset:
        return f"truncated from {offset} to {st.st_size} bytes"
    if prefix:
        fh.seek(0)
        if fh.read(len(prefix)) != prefix:
            return "rewritten in place (its first bytes changed)"
    return None


class Followed(Protocol):
    """A followed file's read state: the offset read up to and the file's first bytes."""

    offset: int
    prefix: bytes


class Reopened(Followed, Protocol):
    """A followed file as :func:`reopened` reads and updates it: where it is (``path``, and the
    watched directory it must lie in or None), what it was at the last open (``identity``,
    ``size``, ``mtime``), the stat key of the last read that reached its end (``seen``), and
    ``restart()``, which puts the reader back at the start of the file."""

    path: str
    within: str | None
    identity: tuple[int, int] | None
    size: int
    mtime: float | None
    seen: tuple[int, int, int, int] | None

    def restart(self) -> None: ...


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """(device, inode, size, mtime in ns): equal keys, the file has not changed."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Opened(NamedTuple):
    """A followed file opened again by :func:`reopened`: the open file, its fstat, and why it
    must be read from the start (None: go on from the offset read so far)."""

    file: BinaryIO
    stat: os.stat_result
    reset: str | None


@contextlib.contextmanager
def reopened(tail: Reopened) -> Iterator[Opened | None]:
    """The followed file opened again for its next read, closed when the ``with`` block ends
    (whatever ends it): None when it is unchanged since the read that reached its end
    (``tail.seen``), else an :class:`Opened`. On a reset ``tail.restart()`` has run;
    ``tail.identity``, ``size`` and ``mtime`` are the open file's and ``tail.seen`` is cleared
    (the caller sets it again once it has read to the end). Raises OSError when the file cannot
    be read (:func:`open_regular`)."""
    if stat_key(os.stat(tail.path)) == tail.seen:
        yield None
        return
    with open_regular(tail.path, tail.within) as fh:
        st = os.fstat(fh.fileno())
        reset = why_reread(fh, tail.identity, tail.offset, tail.prefix)
        if reset:
            tail.restart()
        tail.identity, tail.size, tail.mtime = (st.st_dev, st.st_ino), st.st_size, st.st_mtime
        tail.seen = None
        yield Opened(fh, st, reset)


def read_chunks(fh: BinaryIO, tail: Followed, budget: int, chunk_bytes: int, prefix_bytes: int) -> Iterator[bytes]:
    """The followed file's next bytes from ``tail.offset`` (``fh`` already there), ``chunk_bytes``
    at a time and at most ``budget`` in all, so the caller parses a chunk before the next is read.
    Each chunk advances ``tail.offset``; the file's first ``prefix_bytes`` are kept in
    ``tail.prefix`` as they go by, for :func:`why_reread` to compare on the next read."""
    while budget > 0:
        data = fh.read(min(chunk_bytes, budget))
        if not data:
            return
        if len(tail.prefix) < prefix_bytes and tail.offset == len(tail.prefix):
            tail.prefix += data[: prefix_bytes - len(tail.prefix)]
        tail.offset += len(data)
        budget -= len(data)
        yield data
