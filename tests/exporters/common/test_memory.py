"""glibc's allocator settings of the exporters (ioparallax/exporters/common/memory.py)."""

from __future__ import annotations

import subprocess
import sys

from ioparallax.exporters.common import memory


def test_the_environment_wins(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert memory.tune_malloc() is False


def test_two_arenas_keep_many_threads_on_two():
    """In a fresh process: with the settings, 16 threads that each allocate large blocks share
    two arenas (glibc's malloc_info lists each arena as a <heap>), where by default they get one
    each (up to 8 a core)."""
    code = """
import ctypes, sys, threading
from ioparallax.exporters.common import memory
if sys.argv[1] == "tuned":
    assert memory.tune_malloc()
libc = ctypes.CDLL("libc.so.6")
keep = []
barrier = threading.Barrier(16)
def work():
    barrier.wait()
    keep.append([bytearray(100_000) for _ in range(20)])
threads = [threading.Thread(target=work) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fdopen.restype = ctypes.c_void_p
f = libc.fdopen(1, b"w")
libc.malloc_info(0, ctypes.c_void_p(f))
libc.fflush(ctypes.c_void_p(f))
"""
    heaps = {}
    for mode in ("tuned", "default"):
        out = subprocess.run(
            [sys.executable, "-c", code, mode], capture_output=True, text=True, check=True, env={"PATH": "/usr/bin"}
        ).stdout
        heaps[mode] = out.count("<heap nr=")
    assert heaps["tuned"] <= 2 < heaps["default"], heaps
