"""Following a growing text file line by line, shared by the exporters that tail tool output
(vdbench-exporter's flatfiles, esxtop-exporter's batch CSVs, pgbench-exporter's progress output
and logs).

A :class:`LineTailer` remembers the byte offset read so far and the partial last line (the tool
may be half-way through writing it), reads only what was appended since, at most
``MAX_READ_BYTES`` per poll in 1 MiB chunks, and starts again from the beginning when the file
was replaced (a new inode), truncated (smaller than what was read) or rewritten in place (its
first bytes changed). A line above ``max_line_bytes`` is garbage: skipped to the next newline and
counted (``too_long``). An unchanged file (same inode, size and mtime) is not opened.
"""

from __future__ import annotations

from collections.abc import Iterator

from ioparallax.exporters.common.watchdir import read_chunks, reopened, stat_key

MAX_READ_BYTES = 64 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024
PREFIX_BYTES = 4096
#: The longest line kept unless the caller says otherwise (vdbench's rows are ~450 bytes).
DEFAULT_MAX_LINE_BYTES = 64 * 1024


class LineTailer:
    """Follows one file: the complete lines appended since the last read."""

    def __init__(self, path: str, within: str | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self.path = path
        self.within = within  # the watched directory the file must lie in (watchdir.open_regular)
        self.offset = 0
        self.size = 0
        self.mtime: float | None = None
        self.identity: tuple[int, int] | None = None
        self.seen: tuple[int, int, int, int] | None = None
        self.prefix = b""
        self._partial = b""
        self._skipping = False  # inside an over-long line: drop bytes to the next newline
        self.max_line_bytes = max_line_bytes
        self.too_long = 0  # lines skipped as too long, over the file's lifetime
        self._too_long_taken = 0  # of which take_too_long() has handed over

    def restart(self) -> None:
        self.offset = 0
        self.prefix = b""
        self._partial = b""
        self._skipping = False

    def read_lines(self, max_bytes: int = MAX_READ_BYTES) -> tuple[list[bytes], str | None]:
        """All complete new lines at once (tests, small files); see :meth:`read_chunks`."""
        lines: list[bytes] = []
        reset = None
        for part, why in self.read_chunks(max_bytes):
            lines.extend(part)
            reset = reset or why
        return lines, reset

    def read_chunks(self, max_bytes: int | None = None) -> Iterator[tuple[list[bytes], str | None]]:
        """(complete new lines without their newline, why the file was read from the start or
        None) per 1 MiB chunk read, so the caller parses a chunk before the next is read: memory
        stays at a chunk's lines whatever the backlog. At most ``max_bytes`` (default
        MAX_READ_BYTES) per call. Raises OSError when the file cannot be read."""
        budget = MAX_READ_BYTES if max_bytes is None else max_bytes
        with reopened(self) as opened:
            if opened is None:
                return  # unchanged since the read that reached its end
            fh, st, reset = opened
            fh.seek(self.offset)
            for data in read_chunks(fh, self, budget, CHUNK_BYTES, PREFIX_BYTES):
                yield self._split(data), reset
                reset = None
            if reset:
                yield [], reset
            if self.offset >= st.st_size:
                self.seen = stat_key(st)

    def take_too_long(self) -> int:
        """The lines skipped as too long since the last call, each handed over once: the caller
        counts them as rejected (reason ``too_long``, :attr:`too_long_detail` for its log line).
        :attr:`too_long` stays the count over the file's lifetime."""
        new, self._too_long_taken = self.too_long - self._too_long_taken, self.too_long
        return new

    @property
    def too_long_detail(self) -> str:
        return f"a line above {self.max_line_bytes} bytes was skipped"

    def _split(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                rest = data[start:]
                if self._skipping:
                    return out
                self._partial += rest
                if len(self._partial) > self.max_line_bytes:
                    self._partial = b""
                    self._skipping = True
                    self.too_long += 1
                return out
            piece = data[start:nl]
            start = nl + 1
            if self._skipping:
                self._skipping = False
                continue
            line = self._partial + piece if self._partial else piece
            self._partial = b""
            if len(line) > self.max_line_bytes:
                self.too_long += 1
                continue
            out.append(line.rstrip(b"\r"))

    def take_partial(self) -> bytes:
        """End of input (convert): the unterminated last line, if any."""
        rest, self._partial = self._partial, b""
        return rest
