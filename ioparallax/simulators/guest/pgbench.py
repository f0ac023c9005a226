"""pgbench's console output for the VMs whose scenario has an application (``application:
{kind: pgbench}``), from the trace: what ``pgbench -c C -j J -T <period> -P N`` in the VM would
print, for pgbench-exporter to follow unchanged.

One run per scenario period (the first one starts when the simulator does): the version line and
``starting vacuum...end.`` when it starts, a progress line every ``progress_s`` seconds of the
run, the summary at the period's end; all appended to ``<dir>/<vm>/pgbench/pgbench-<vm>.out`` as
``pgbench ... >> out 2>&1`` in a loop would (the file starts over past :data:`MAX_FILE_BYTES`).

The truth: in period second ``t`` the VM's disks do ``ops(t)`` I/Os; the application completes
``ops(t) / ios_per_transaction`` transactions, of which ``failure_ratio`` fail (only pgbench 15+
prints failures). Counts are whole: each interval prints the whole transactions completed in it
(the fraction carries over), so pgbench-exporter's ``round(tps x interval)`` gives them back
exactly and the summary's total is their sum. Latency is Little's law over the clients: ``clients
/ (transactions per second)``, its stddev a fixed 30 % of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ioparallax.simulators.scenario import Application, Trace, Vm

log = logging.getLogger("ioparallax.guest.pgbench")

#: The output file starts over (a new file) once it is this large: a long demo stays bounded.
MAX_FILE_BYTES = 4 * 1024 * 1024
STDDEV_SHARE = 0.3


def output_path(out_dir: Path, vm: str) -> Path:
    return out_dir / vm / "pgbench" / f"pgbench-{vm}.out"


def truth(trace: Trace, vm: Vm, t: int) -> tuple[float, float]:
    """(successful, failed) transactions of ``vm``'s application in period second ``t``."""
    app = vm.application
    assert app is not None
    ops = sum(trace.second(d, t).read_ops + trace.second(d, t).write_ops for d in vm.disks)
    total = ops / app.ios_per_transaction
    return total * (1.0 - app.failure_ratio), total * app.failure_ratio


def latency_ms(app: Application, transactions: float, seconds: float) -> float:
    """Little's law: each of the clients has one transaction in flight all the time."""
    return 1000.0 * app.clients * seconds / transactions if transactions > 0 else 0.0


@dataclass
class _Run:
    start: int  # wall-clock second the run started
    end: int  # wall-clock second it ends (its period's end)
    ok: int = 0  # whole transactions printed so far
    failed: int = 0
    carry_ok: float = 0.0  # fractions not printed yet
    carry_failed: float = 0.0
    interval_ok: int = 0
    interval_failed: int = 0
    interval_start: int = 0


class GuestPgbench:
    """pgbench's output per VM with an application, one run per period."""

    def __init__(self, trace: Trace, out_dir: Path, vms: list[Vm]):
        self.trace = trace
        self.out_dir = out_dir
        self.vms = [vm for vm in vms if vm.application is not None and vm.application.kind == "pgbench"]
        self._runs: dict[str, _Run] = {}
        self._written: int | None = None

    def setup(self) -> dict[str, str]:
        """Fresh output files; returns {vm: its pgbench directory}."""
        out = {}
        for vm in self.vms:
            path = output_path(self.out_dir, vm.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            out[vm.name] = str(path.parent)
        return out

    def write(self, T: int) -> None:
        """Bring the outputs up to wall-clock second ``T`` (the second that ended at T): the
        seconds since the last write, at most one period back."""
        if not self.vms:
            return
        first = self._written + 1 if self._written is not None else T
        first = max(first, T - self.trace.period + 1)
        for t in range(first, T + 1):
            for vm in self.vms:
                self._second(vm, t)
        self._written = T

    def _second(self, vm: Vm, T: int) -> None:
        """Second [T-1, T) of ``vm``'s run."""
        app = vm.application
        assert app is not None
        lines: list[str] = []
        run = self._runs.get(vm.name)
        if run is None or T - 1 >= run.end:
            start = T - 1
            end = self.trace.period_start(start) + self.trace.period
            run = self._runs[vm.name] = _Run(start=start, end=end, interval_start=start)
            lines += [f"pgbench ({app.version})", "starting vacuum...end."]
        ok, failed = truth(self.trace, vm, self.trace.period_second(T - 1))
        run.carry_ok += ok
        run.carry_failed += failed
        whole_ok, whole_failed = int(run.carry_ok), int(run.carry_failed)
        run.carry_ok -= whole_ok
        run.carry_failed -= whole_failed
        run.interval_ok += whole_ok
        run.interval_failed += whole_failed
        elapsed = T - run.start
        if elapsed % app.progress_s == 0:
            lines.append(self._progress(app, run, T))
        if T >= run.end:
            if run.interval_start < T:  # the last partial interval: counted in the summary only
                run.ok += run.interval_ok
                run.failed += run.interval_failed
            lines += self._summary(app, run)
        if lines:
            self._append(vm, lines)

    def _progress(self, app: Application, run: _Run, T: int) -> str:
        dt = T - run.interval_start
        n, f = run.interval_ok, run.interval_failed
        lat = latency_ms(app, n + f, dt)
        line = f"progress: {T - run.start:.1f} s, {n / dt:.1f} tps, lat {lat:.3f} ms stddev {lat * STDDEV_SHARE:.3f}"
        if app.counts_failures:
            line += f", {f} failed"
        run.ok += n
        run.failed += f
        run.interval_ok = run.interval_failed = 0
        run.interval_start = T
        return line

    def _summary(self, app: Application, run: _Run) -> list[str]:
        duration = run.end - run.start
        n, f = run.ok, run.failed
        lat = latency_ms(app, n + f, duration)
        lines = [
            "transaction type: <builtin: TPC-B (sort of)>",
            f"scaling factor: {app.scale}",
            "query mode: simple",
            f"number of clients: {app.clients}",
            f"number of threads: {app.threads}",
        ]
        if app.counts_failures:
            lines.append("maximum number of tries: 1")
        lines += [f"duration: {duration} s", f"number of transactions actually processed: {n}"]
        if app.counts_failures:
            share = 100.0 * f / (n + f) if n + f else 0.0
            lines.append(f"number of failed transactions: {f} ({share:.3f}%)")
        lines += [
            f"latency average = {lat:.3f} ms",
            f"latency stddev = {lat * STDDEV_SHARE:.3f} ms",
            "initial connection time = 12.500 ms",
            f"tps = {n / duration if duration else 0.0:.6f} (without initial connection time)",
        ]
        return lines

    def _append(self, vm: Vm, lines: list[str]) -> None:
        path = output_path(self.out_dir, vm.name)
        if path.exists() and path.stat().st_size > MAX_FILE_BYTES and lines[0].startswith("pgbench ("):
            tmp = path.with_name(path.name + ".new")
            tmp.write_text("\n".join(lines) + "\n")
            tmp.replace(path)
            return
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
