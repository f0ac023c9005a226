"""Console programs whose reader goes away: ``ioparallax-check job.fio | head -1``.

When the program reading our stdout exits early (``head``, ``less`` quit, ``grep -q``), the next
write fails with EPIPE. Python ignores SIGPIPE, so that is a ``BrokenPipeError`` traceback where a
C tool (``cat``, ``git log``) would have been ended quietly by the signal. :func:`quiet_on_closed_stdout`
wraps a console entry point so that it ends as those tools do: no traceback, no message, exit
status 141 (128 + SIGPIPE, what the shell reports for ``yes | head -1``, so a script under
``set -o pipefail`` sees the same as from ``cat``).

Only a closed stdout is taken for this: the BrokenPipeError must come while stdout's reader is
gone (poll reports an error on it); one from a socket (a Prometheus or a target that hung up)
propagates as before. SIGPIPE is not restored to its default for the same reason: the exporters'
HTTP servers must not die when a client closes its connection mid-answer.
"""

from __future__ import annotations

import functools
import os
import select
import sys
from collections.abc import Callable
from typing import Any, TypeVar

#: Exit status when stdout was closed by its reader: 128 + SIGPIPE, as a shell shows for a tool
#: the signal ended.
EXIT_STDOUT_CLOSED = 128 + 13

F = TypeVar("F", bound=Callable[..., int | None])


def stdout_closed() -> bool:
    """True if stdout is a pipe or socket whose reader has gone (poll says POLLERR or POLLHUP)."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no stdout, closed, or not a real file
        return False


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit (what is still
    buffered) does not fail again and print ``Exception ignored ... BrokenPipeError``."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def quiet_on_closed_stdout(main: F) -> F:
    """Wrap a console entry point: a BrokenPipeError raised while stdout's reader is gone (in
    ``main`` or in flushing what it printed) ends the program quietly with
    :data:`EXIT_STDOUT_CLOSED`. A ``main`` that catches OSError to report it must let
    BrokenPipeError through to here."""

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> int | None:
        try:
            try:
                return main(*args, **kwargs)
            finally:
                if sys.stdout is not None:
                    sys.stdout.flush()
        except BrokenPipeError:
            if not stdout_closed():
                raise
            _discard_stdout()
            return EXIT_STDOUT_CLOSED

    return run  # type: ignore[return-value]
