"""Per VM, a fio status stream file that grows by one record a second, a sysfs tree and the
kernel's block-layer counters.

Layout under the output directory, per VM::

    <dir>/<vm>/fio-status.json     one compact json+ record per line, appended every second
    <dir>/<vm>/sys/block/<dev>/... the guest's disk facts
    <dir>/<vm>/proc/diskstats      the block layer's counters, rewritten every second (for
                                   node_exporter --path.procfs=<dir>/<vm>/proc)
    <dir>/<vm>/udev/b8:16...       udev's database entries of the disks (--path.udev.data)

The stream file is replaced (a new file, renamed into place) at every period boundary, starting
with the current record: the file stays bounded and the fio exporter reads the new file from its
start; the jobs' counters go on (a continuous job does not restart).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from ioparallax.simulators.scenario import Trace

from .diskstats import GuestDiskstats
from .fio import GuestFio
from .sysfs import write_tree, write_udev

log = logging.getLogger("ioparallax.guest")

STREAM_NAME = "fio-status.json"
DISKSTATS = Path("proc") / "diskstats"


def vm_paths(out_dir: str | os.PathLike[str], vm: str) -> tuple[Path, Path]:
    """(stream file, sysfs root) of a VM."""
    base = Path(out_dir) / vm
    return base / STREAM_NAME, base / "sys"


def vm_diskstats(out_dir: str | os.PathLike[str], vm: str) -> Path:
    """The VM's ``/proc/diskstats`` (its procfs root is the parent)."""
    return Path(out_dir) / vm / DISKSTATS


class GuestWriter:
    def __init__(
        self, trace: Trace, out_dir: str | os.PathLike[str], vms: list[str] | None = None, anchor: float | None = None
    ):
        self.trace = trace
        self.out_dir = Path(out_dir)
        self.fio = GuestFio(trace, anchor=anchor)
        self.diskstats = GuestDiskstats(trace, fio=self.fio)
        names = [vm.name for vm in trace.scenario.vms]
        unknown = [v for v in (vms or []) if v not in names]
        if unknown:
            raise ValueError(f"no VM {', '.join(unknown)} in scenario {trace.scenario.name} ({', '.join(names)})")
        self.vms = [vm for vm in trace.scenario.vms if not vms or vm.name in vms]
        self._period_of: dict[str, int] = {}

    def setup(self) -> dict[str, dict[str, str]]:
        """Write the sysfs trees and start fresh stream files; returns {vm: {stream, sysfs, procfs, udev}}."""
        out = {}
        for vm in self.vms:
            stream, sysfs = vm_paths(self.out_dir, vm.name)
            write_tree(vm, sysfs)
            stream.parent.mkdir(parents=True, exist_ok=True)
            stream.unlink(missing_ok=True)
            diskstats = vm_diskstats(self.out_dir, vm.name)
            diskstats.parent.mkdir(parents=True, exist_ok=True)
            udev = write_udev(vm, self.out_dir / vm.name / "udev")
            out[vm.name] = {
                "stream": str(stream),
                "sysfs": str(sysfs),
                "procfs": str(diskstats.parent),
                "udev": str(udev),
            }
        return out

    def write(self, T: int) -> None:
        """Append every VM's record for wall-clock second ``T`` and rewrite its diskstats."""
        period_index = self.trace.period_index(T)
        for vm in self.vms:
            stream, _ = vm_paths(self.out_dir, vm.name)
            line = json.dumps(self.fio.record(vm.name, T), separators=(",", ":")) + "\n"
            if self._period_of.get(vm.name) != period_index and stream.exists():
                tmp = stream.with_suffix(".json.new")
                tmp.write_text(line)
                os.replace(tmp, stream)
            else:
                with open(stream, "a", encoding="utf-8") as fh:
                    fh.write(line)
            self._period_of[vm.name] = period_index
            diskstats = vm_diskstats(self.out_dir, vm.name)
            tmp = diskstats.with_suffix(".new")
            tmp.write_text(self.diskstats.text(vm.name, T))
            os.replace(tmp, diskstats)  # a reader sees the old or the new file, whole

    def run(self, stop: threading.Event | None = None, after: int | None = None) -> None:
        """Write a record at every wall-clock second (after ``after``, already written) until
        ``stop`` is set."""
        stop = stop or threading.Event()
        if after is None:
            T = int(time.time())
            self.write(T)
        else:
            T = after
        while not stop.is_set():
            T += 1
            delay = T + 0.02 - time.time()
            if delay > 0 and stop.wait(delay):
                break
            now = int(time.time())
            if now > T + 5:  # suspended or starved: catch up to now, not record by record
                log.warning("skipped %d seconds of records", now - T)
                T = now
            self.write(T)
