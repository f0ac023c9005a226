"""vdbench output directories of the VMs whose load generator is vdbench, from the trace.

HCIBench and X-Ray drive vdbench from a controller across worker VMs: one multi-host run, one
output directory with the all-hosts ``flatfile.html`` and a report per host. The simulated
cluster does the same: the scenario's vdbench VMs are the hosts (``hd=<host name>``: the guest's
host name, which names the guest in the rules' join) of one run per period (``rd=rd1``,
``elapsed`` = the period, ``interval=1``), in ``<dir>/vdbench/run-<period start>/``, written with the
vdbench helper's :class:`~ioparallax.simulators.guest.vdbench.VdbenchOutput` one interval row a
second while it runs, and closed with vdbench's ``avg_2-N`` summary at the period's end. Each host
drives its first disk's device (``lun=/dev/sdb``); a host's interval is the trace's second (ops,
MB/s with MB = 2^20 bytes, read share, op-weighted response times, the Little's-law queue depth).
The newest :data:`KEEP` run directories are kept. The first stream of the first vdbench VM gives
the run definition (``xfersize``, ``rdpct``, ``seekpct``, ``threads`` = its iodepth; ``openflags``,
``compratio``, ``dedupratio`` from its ``vdbench:`` options).
"""

from __future__ import annotations

import logging
import math
import shutil
from pathlib import Path

from ioparallax.simulators.scenario import Trace, VdbenchOptions, Vm

from .vdbench import HostInterval, RunDefinition, VdbenchOutput

log = logging.getLogger("ioparallax.guest.vdbench")

KEEP = 2  # run directories kept
RUN_NAME = "rd1"


class GuestVdbench:
    """The vdbench multi-host run of a scenario's vdbench VMs, one output directory per period."""

    def __init__(self, trace: Trace, out_dir: Path, anchor: int, vms: list[Vm]):
        self.trace = trace
        self.period = trace.period
        self.out_dir = out_dir
        self.anchor = anchor
        self.vms = [vm for vm in vms if vm.load_generator == "vdbench"]
        self._current: VdbenchOutput | None = None
        self._current_start: int | None = None
        self._written: int | None = None

    def definition(self) -> RunDefinition:
        disk = self.vms[0].disks[0]
        s = disk.streams[0]
        total = s.read_iops + s.write_iops
        rand = s.read_random if s.read_iops else s.write_random
        opts = s.vdbench or VdbenchOptions()
        return RunDefinition(
            name=RUN_NAME,
            xfersize=int(round(s.read_size.mean_bytes if s.read_iops else s.write_size.mean_bytes)),
            rdpct=round(100.0 * s.read_iops / total, 1) if total else 0.0,
            seekpct=round(100.0 * rand, 1),
            threads=s.iodepth,
            iorate="max",
            elapsed=self.period,
            interval=1,
            lun=f"/dev/{disk.guest_device}",
            lunsize_gib=disk.capacity_bytes / 1024**3,
            openflags=opts.openflags,
            compratio=opts.compratio,
            dedupratio=opts.dedupratio,
        )

    def host_interval(self, vm: Vm, t: int) -> HostInterval:
        """What ``vm`` measured in period second ``t`` (its first disk)."""
        sec = self.trace.second(vm.disks[0], t)
        ops = sec.read_ops + sec.write_ops
        r_ms, w_ms = sec.read_latency_s * 1000, sec.write_latency_s * 1000
        sigma = vm.disks[0].streams[0].latency_sigma
        mean_ms = (sec.read_latency_sum_s + sec.write_latency_sum_s) * 1000 / ops if ops else 0.0
        return HostInterval(
            rate=ops,
            mb_per_s=(sec.read_bytes + sec.write_bytes) / 1048576,
            read_pct=100.0 * sec.read_ops / ops if ops else 0.0,
            read_resp_ms=r_ms,
            write_resp_ms=w_ms,
            resp_max_ms=mean_ms * math.exp(3 * sigma),
            resp_std_ms=mean_ms * math.sqrt(math.exp(sigma * sigma) - 1),
            queue_depth=sec.read_outstanding_s + sec.write_outstanding_s,
            cpu_used_pct=8.0,
            cpu_sys_pct=3.0,
        )

    def write(self, T: int) -> None:
        """Bring the output up to wall-clock second ``T``: rows for the seconds since the last write
        (at most one period back: a suspended simulator does not write a backlog)."""
        if not self.vms:
            return
        first = self._written + 1 if self._written is not None else T
        first = max(first, T - self.period + 1)
        for t in range(first, T + 1):
            self._second(t)
        self._written = T

    def _second(self, T: int) -> None:
        start = self.anchor + ((T - self.anchor) // self.period) * self.period
        if self._current_start != start:
            if self._current is not None and self._current_start is not None:
                self._current.end_run(RUN_NAME, T)
            self._begin(start, T)
        assert self._current is not None
        hosts = {vm.hostname: self.host_interval(vm, self.trace.period_second(T - 1)) for vm in self.vms}
        self._current.interval(RUN_NAME, hosts, T)

    def _begin(self, start: int, T: int) -> None:
        run_dir = self.out_dir / f"run-{start}"
        shutil.rmtree(run_dir, ignore_errors=True)
        self._current = VdbenchOutput(run_dir, [self.definition()], hosts=[vm.hostname for vm in self.vms])
        self._current.start()
        self._current.begin_run(RUN_NAME, T)
        self._current_start = start
        runs = sorted(self.out_dir.glob("run-*"), key=lambda p: int(p.name.removeprefix("run-")))
        for old in runs[:-KEEP]:
            shutil.rmtree(old, ignore_errors=True)
        log.info("vdbench run %s started in %s (%d hosts)", RUN_NAME, run_dir, len(self.vms))
