"""glibc's allocator set up for an exporter that answers many probes at once from threads.

By default glibc gives each thread that allocates its own malloc arena (up to 8 per core), and
raises its threshold for serving a large block with its own ``mmap`` up to 32 MiB after the first
such block is freed. An exporter's probe threads allocate pages, records and answers of several
MB each: with many arenas and a raised threshold, the memory one probe freed is kept in its
arena and not reused by the next probe's thread, so the process' RSS grows with every round of
concurrent probes (bench/stargate_cluster.py, 16 probes of 250 vdisks and a 4,000-vdisk probe
in one process: 197 MB peak and growing, against 129 MB with the settings below; docs/stargate.md,
Cluster scale). Two arenas, and large blocks (from 128 KiB, glibc's own default) always mapped
and unmapped, keep it flat; Python's own allocator serves the small objects either way.

The same as starting the process with ``MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072``, which
an operator can still set (the environment wins: nothing is changed then). Elsewhere than
glibc (musl, macOS) nothing is done.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

#: mallopt parameters (glibc's malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
ARENAS = 2
MMAP_THRESHOLD = 128 * 1024


def tune_malloc() -> bool:
    """Two malloc arenas and a fixed mmap threshold (module docstring); True when applied. Call
    it at start-up, before the process starts its threads."""
    if any(k in os.environ for k in ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_")):
        log.debug("malloc settings left to the environment")
        return False
    try:
        libc = ctypes.CDLL(None)  # the process' own symbols: the C library it runs on (no ldconfig)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 (glibc only: musl has mallopt as a no-op stub)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(M_ARENA_MAX, ARENAS) == 1 and mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    log.debug("malloc: %d arenas, mmap from %d bytes: %s", ARENAS, MMAP_THRESHOLD, "set" if ok else "refused")
    return ok
