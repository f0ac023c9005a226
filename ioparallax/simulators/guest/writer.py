"""Per VM, a fio status stream file that grows by one record a second, a sysfs tree and the
kernel's block-layer counters.

Layout under the output directory, per Linux VM::

    <dir>/<vm>/fio-status.json     one compact json+ record per line, appended every second
                                   (load_generator fio)
    <dir>/<vm>/sys/block/<dev>/... the guest's disk facts
    <dir>/<vm>/proc/diskstats      the block layer's counters, rewritten every second (for
                                   node_exporter --path.procfs=<dir>/<vm>/proc)
    <dir>/<vm>/udev/b8:16...       udev's database entries of the disks (--path.udev.data)
    <dir>/<vm>/pgbench/pgbench-<vm>.out   pgbench's console output, one run per period (VMs whose
                                   scenario has an ``application: {kind: pgbench}``; for
                                   pgbench-exporter --pgbench.watch <dir>/<vm>/pgbench)

and per Windows VM::

    <dir>/vdbench/run-<period start>/          the vdbench multi-host run of the Linux VMs whose
                                   load generator is vdbench (flatfile.html, parmfile.html,
                                   <host name>.html per host; one directory per period)
    <dir>/diskspd/<HOSTNAME>-<run start>.xml   DiskSPD's -Rxml document of each finished run
                                   (load_generator diskspd; one directory for every VM, as on
                                   the collector host the results are copied to)

    <dir>/<vm>/windows/windows_exporter.prom   windows_exporter's disk and host name metrics,
                                   rewritten every second (served by node_exporter's textfile
                                   collector: --collector.textfile.directory=<dir>/<vm>/windows)

The stream file is replaced (a new file, renamed into place) at every period boundary, starting
with the current record: the file stays bounded and the fio exporter reads the new file from its
start; the jobs' counters go on (a continuous job does not restart).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path

from ioparallax.simulators.scenario import Trace

from .diskspd import GuestDiskspd, write_finished_runs
from .diskstats import GuestDiskstats
from .fio import GuestFio
from .pgbench import GuestPgbench
from .sysfs import write_tree, write_udev
from .vdbench_run import GuestVdbench
from .windows import GuestWindows

log = logging.getLogger("ioparallax.guest")

STREAM_NAME = "fio-status.json"
DISKSTATS = Path("proc") / "diskstats"
WINDOWS_PROM = Path("windows") / "windows_exporter.prom"
DISKSPD_DIR = "diskspd"
VDBENCH_DIR = "vdbench"


def vm_paths(out_dir: str | os.PathLike[str], vm: str) -> tuple[Path, Path]:
    """(stream file, sysfs root) of a VM."""
    base = Path(out_dir) / vm
    return base / STREAM_NAME, base / "sys"


def vm_diskstats(out_dir: str | os.PathLike[str], vm: str) -> Path:
    """The VM's ``/proc/diskstats`` (its procfs root is the parent)."""
    return Path(out_dir) / vm / DISKSTATS


def vm_windows_prom(out_dir: str | os.PathLike[str], vm: str) -> Path:
    """A Windows VM's windows_exporter exposition (its textfile directory is the parent)."""
    return Path(out_dir) / vm / WINDOWS_PROM


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, path)  # a reader sees the old or the new file, whole


class GuestWriter:
    def __init__(
        self, trace: Trace, out_dir: str | os.PathLike[str], vms: list[str] | None = None, anchor: float | None = None
    ):
        self.trace = trace
        self.out_dir = Path(out_dir)
        self.fio = GuestFio(trace, anchor=anchor)
        self.diskstats = GuestDiskstats(trace, fio=self.fio)
        self.windows = GuestWindows(trace, fio=self.fio)
        self.diskspd = GuestDiskspd(trace, fio=self.fio)
        self._last_written: int | None = None
        names = [vm.name for vm in trace.scenario.vms]
        unknown = [v for v in (vms or []) if v not in names]
        if unknown:
            raise ValueError(f"no VM {', '.join(unknown)} in scenario {trace.scenario.name} ({', '.join(names)})")
        self.vms = [vm for vm in trace.scenario.vms if not vms or vm.name in vms]
        mine = {vm.name for vm in self.vms}
        self.diskspd.vms = {name: vm for name, vm in self.diskspd.vms.items() if name in mine}
        self.vdbench = GuestVdbench(trace, self.out_dir / VDBENCH_DIR, int(self.fio.anchor), self.vms)
        self.pgbench = GuestPgbench(trace, self.out_dir, self.vms)
        self._period_of: dict[str, int] = {}

    def setup(self) -> dict[str, dict[str, str]]:
        """Write the sysfs trees and start fresh stream files; returns, per VM, its ``os`` and
        ``load_generator`` and where its files are: Linux {stream (fio only), sysfs, procfs,
        udev, pgbench (with an application)}, Windows {windows} (the textfile directory)."""
        out: dict[str, dict[str, str]] = {}
        for vm in self.vms:
            where = {"os": vm.guest_os, "load_generator": vm.load_generator}
            if vm.windows:
                prom = vm_windows_prom(self.out_dir, vm.name)
                prom.parent.mkdir(parents=True, exist_ok=True)
                prom.unlink(missing_ok=True)
                out[vm.name] = {**where, "windows": str(prom.parent)}
                if vm.load_generator == "diskspd":
                    results = self.out_dir / DISKSPD_DIR
                    results.mkdir(parents=True, exist_ok=True)
                    for old in results.glob(f"{vm.hostname}-*.xml"):
                        old.unlink()
                    out[vm.name]["diskspd"] = str(results)
                continue
            stream, sysfs = vm_paths(self.out_dir, vm.name)
            write_tree(vm, sysfs)
            stream.parent.mkdir(parents=True, exist_ok=True)
            stream.unlink(missing_ok=True)
            diskstats = vm_diskstats(self.out_dir, vm.name)
            diskstats.parent.mkdir(parents=True, exist_ok=True)
            udev = write_udev(vm, self.out_dir / vm.name / "udev")
            out[vm.name] = {
                **where,
                "sysfs": str(sysfs),
                "procfs": str(diskstats.parent),
                "udev": str(udev),
            }
            if vm.load_generator == "fio":
                out[vm.name]["stream"] = str(stream)
            elif vm.load_generator == "vdbench":
                out[vm.name]["vdbench"] = str(self.out_dir / VDBENCH_DIR)
        if self.vdbench.vms:
            shutil.rmtree(self.out_dir / VDBENCH_DIR, ignore_errors=True)
            (self.out_dir / VDBENCH_DIR).mkdir(parents=True)
        for name, directory in self.pgbench.setup().items():
            out[name]["pgbench"] = directory
        return out

    def write(self, T: int) -> None:
        """Append every VM's record for wall-clock second ``T`` and rewrite its diskstats (Windows:
        its windows_exporter textfile, and the DiskSPD documents of the runs that ended since the
        last write)."""
        period_index = self.trace.period_index(T)
        if self.diskspd.vms:
            results = self.out_dir / DISKSPD_DIR
            results.mkdir(parents=True, exist_ok=True)
            after = self._last_written if self._last_written is not None else T - 1
            write_finished_runs(self.diskspd, results, after, T)
        self.vdbench.write(T)
        self.pgbench.write(T)
        self._last_written = T
        for vm in self.vms:
            if vm.windows:
                _replace(vm_windows_prom(self.out_dir, vm.name), self.windows.text(vm.name, T))
                continue
            _replace(vm_diskstats(self.out_dir, vm.name), self.diskstats.text(vm.name, T))
            if vm.load_generator != "fio":
                continue
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
