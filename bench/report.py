"""How long the PoC report takes, and how much memory, over 1 hour of 100 VM disks at 5 s scrapes,
against a baseline of 10 VM disks over the same hour: the number of Prometheus queries must be the
same (one per kind of series), time and memory grow with the data.

Inputs (made at start, in a temp dir): a generated OpenMetrics file per size with every series the
report reads (recording-rule outputs written directly as series, the raw fio interval and vCenter
20 s sample series, Stargate read sources and write destinations, the identity _info series, up and
ALERTS), turned into TSDB blocks by `promtool tsdb create-blocks-from openmetrics`, then served by a
real Prometheus (Debian package) on a free loopback port. The report runs in a child process
(ioparallax.report.report.make_report, HTML rendered, no PDF); its memory is the sum of the RSS of
the child and every process it starts (the figure workers), sampled every 50 ms, the highest sum
over the runs.

The time of a report is counted from the child process' start (the interpreter and the imports
included, as a user running ``ioparallax-report`` waits for them: about 0.9 s; issue 34), measured
by this process around the child; the time after the imports is printed beside it. The bench
prints the calibration (bench/gate.py) at its start and end, and the report's CPU per VM
disk-hour in calibration units (CPU seconds / the pure-Python kernel's), the figure that compares
machines.

Prints for each size: min and median time over the runs with the load average, the peak RSS of
the process tree, queries, and the ratios 100/10; then the 100-disk report again with a CPU-bound
neighbour process the bench starts itself (``--neighbour-runs``; the figure a user on a busy
laptop meets, no target). Targets (issue 24; exit 1 when one is missed): the same number of
queries for both sizes, and for 100 VM disks under 20 s (median) and under 400 MB (the process
tree) on 2 cores.

With --against REV (e.g. a commit before a speed change), the report code of REV (its ioparallax/
and ioparallax/mixin/, exported by `git archive` to a temp dir) runs on the same Prometheus, its runs
interleaved with this tree's so that both see the same load, and the ratio REV/this tree is printed.

Run: .venv/bin/python bench/report.py [--runs 3] [--neighbour-runs 1] [--against REV]
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gate

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ioparallax.simulators.process import free_port, start, wait_for_http  # noqa: E402

HOUR = 3600
SCRAPE = 5
DIRS = ("read", "write")
#: ops/s, bytes/s and latency (s) of a disk: the base of every generated series of the three
BASES = (3000.0, 3000 * 4096.0, 0.0005)


def lab(**kw: str) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in kw.items()) + "}"


def generate(path: Path, disks: int, end: int) -> int:
    """Write the OpenMetrics file: one family at a time (OpenMetrics forbids interleaving)."""
    start = end - HOUR
    ts = list(range(start, end + 1, SCRAPE))
    t = [x - start for x in ts]
    keys = [(f"vm-{i:03d}", "scsi0:1", str(1000 + i), f"guest-{i:03d}:9200") for i in range(disks)]
    samples = 0
    with open(path, "w") as f:

        def family(name: str, rows) -> None:
            nonlocal samples
            f.write(f"# TYPE {name} gauge\n")
            for labels, fn in rows:
                for x, tt in zip(ts, t):
                    v = fn(tt)
                    if v is None:
                        continue
                    f.write(f"{name}{labels} {v:.10g} {x}\n")
                    samples += 1

        def per_disk(base, wave=0.2, period=300):
            return [
                (
                    lab(vm=vm, disk=d),
                    (lambda b: lambda tt: b * (1 + wave * math.sin(2 * math.pi * tt / period)))(
                        base * (1 + i % 7 / 10)
                    ),
                )
                for i, (vm, d, vd, inst) in enumerate(keys)
            ]

        for layer in ("guest", "guest_os", "vm", "storage"):
            agg = {"storage": "avg1m"}.get(layer)
            for d in DIRS:
                for q, base in zip(("ops", "bytes", "latency_seconds"), BASES):
                    a = agg or ("mean1m" if q == "latency_seconds" else "rate1m")
                    family(f"vm_disk:ioparallax_{layer}_{d}_{q}:{a}", per_disk(base))

        # the application's view (fio: a 2 s burst every 20 s) and vCenter's (a level that steps at each 20 s sample)
        def fio(vm: str, dk: str, inst: str) -> str:
            return lab(instance=inst, job="fio", jobname="oltp", jobid="0", host=vm, source="/run/fio.json")

        vc = lambda vm, dk, inst: lab(instance="vc", job="vcenter", vm=vm, disk=dk)  # noqa: E731
        burst = lambda b: lambda tt: b * (1.5 if tt % 20 < 2 else 0.95)  # noqa: E731
        steps = lambda b: lambda tt: b * (1 + 0.1 * ((tt // 20) % 3))  # noqa: E731
        for d in DIRS:
            for prefix, names, labels, wave in (
                (f"fio_{d}_interval_", ("iops", "bandwidth_bytes_per_second", "clat_mean_seconds"), fio, burst),
                (
                    f"vcenter_virtual_disk_sample_{d}_",
                    ("ops_per_second", "bytes_per_second", "latency_precise_seconds"),
                    vc,
                    steps,
                ),
            ):
                for q, base in zip(names, BASES):
                    family(prefix + q, [(labels(vm, dk, inst), wave(base)) for vm, dk, vd, inst in keys])
        vd_rows = lambda fn: [(lab(vdisk_id=vd, vm=vm, disk=dk), fn) for vm, dk, vd, inst in keys]  # noqa: E731
        family("vdisk:ioparallax_read_zero:ratio", vd_rows(lambda tt: 0.02))
        family("vdisk:ioparallax_write_zero:ratio", vd_rows(lambda tt: 0.01))
        family("vdisk:ioparallax_read_zero_measurable:bool", vd_rows(lambda tt: 1))
        family("vdisk:ioparallax_write_zero_measurable:bool", vd_rows(lambda tt: 1))
        family("vdisk:ioparallax_read_cache:ratio", vd_rows(lambda tt: 0.2))
        family("vdisk:ioparallax_working_set_to_cache:ratio", vd_rows(lambda tt: 5.0))
        family("vdisk:ioparallax_rmw_read_to_write:ratio1m", vd_rows(lambda tt: 0.0))
        family("vdisk:ioparallax_vdisk:info", vd_rows(lambda tt: 1))
        family("vm_disk:ioparallax_guest_iodepth:sum", per_disk(8, wave=0))
        family("vm_disk:ioparallax_vm_outstanding_ios:rate1m", per_disk(3, wave=0.1))
        family("vm_disk:ioparallax_guest_buffered_io:bool", per_disk(0, wave=0))
        family("vm_disk:ioparallax_guest_os_to_fio_ops:ratio1m", per_disk(1, wave=0))
        family(
            "guest_job:ioparallax_vm_disk:info",
            [
                (
                    lab(
                        instance=inst,
                        job="fio",
                        jobname="oltp",
                        jobid="0",
                        host=vm,
                        source="/run/fio.json",
                        vm=vm,
                        disk=dk,
                    ),
                    lambda tt: 1,
                )
                for vm, dk, vd, inst in keys
            ],
        )
        family(
            "guest_device:ioparallax_guest_disk:info",
            [
                (lab(instance=inst, job="fio", device="sdb", disk_uuid=f"u-{vd}", vm=vm, disk=dk), lambda tt: 1)
                for vm, dk, vd, inst in keys
            ],
        )
        family(
            "vcenter_virtual_disk_info",
            [
                (
                    lab(
                        instance="vc",
                        job="vcenter",
                        vm=vm,
                        disk=dk,
                        disk_uuid=f"u-{vd}",
                        backing_file=f"[ds] {vm}/{vm}.vmdk",
                    ),
                    lambda tt: 1,
                )
                for vm, dk, vd, inst in keys
            ],
        )
        family(
            "fio_guest_disk_info",
            [
                (lab(instance=inst, job="fio", disk="sdb", serial=f"u{vd}", disk_uuid=f"u-{vd}"), lambda tt: 1)
                for vm, dk, vd, inst in keys
            ],
        )
        family(
            "fio_guest_partition_start_bytes",
            [
                (lab(instance=inst, job="fio", disk="sdb", partition="sdb1"), lambda tt: 1048576)
                for vm, dk, vd, inst in keys
            ],
        )
        for kind, label, names in (
            ("read_source", "source", ("extent_store_ssd", "cache_dram", "oplog", "estore_zero")),
            ("write_destination", "destination", ("oplog", "oplog_zero")),
        ):
            family(
                f"stargate_vdisk_{kind}_bytes_per_second",
                [
                    (
                        lab(instance="cvm-1", job="stargate", vdisk_id=vd, **{label: n}),
                        (lambda k: lambda tt: 1e6 * (k + 1))(k),
                    )
                    for vm, dk, vd, inst in keys
                    for k, n in enumerate(names)
                ],
            )
        family(
            "up",
            [
                (lab(instance=i, job=j), lambda tt: 1)
                for j, i in (("fio", "g"), ("vcenter", "vc"), ("stargate", "cvm-1"))
            ],
        )
        family(
            "ALERTS",
            [
                (
                    lab(alertname="IoparallaxFioJobHygiene", alertstate="firing", severity="warning", vm=keys[0][0]),
                    lambda tt: 1 if 600 < tt < 1800 else None,
                )
            ],
        )
        f.write("# EOF\n")
    return samples


class Prometheus:
    def __init__(self, data: Path, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (workdir / "prometheus.yml").write_text("global: {}\n")
        self.proc = start(
            "prometheus",
            [
                "prometheus",
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=30d",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            workdir / "prometheus.log",
            url=self.url,
        )
        try:
            wait_for_http(self.url + "/-/ready", 120, self.proc, status=200, interval=0.5)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.proc.stop(timeout=30)


CHILD = """
import json, sys, time
sys.path.insert(0, {repo!r})
from ioparallax.report.report import make_report
t0 = time.perf_counter()
r = make_report(prometheus={url!r}, start={start}, end={end})
sec = time.perf_counter() - t0
print(json.dumps({{"seconds": sec, "queries": r.queries, "disks": r.disks, "html_mb": r.size / 1e6}}))
"""


def run_report(url: str, start: int, end: int, repo: Path = REPO, prometheus_pid: int | None = None) -> dict:
    cmd = [sys.executable, "-c", CHILD.format(repo=str(repo), url=url, start=start, end=end)]
    prom0 = gate.cpu_seconds(prometheus_pid) if prometheus_pid else 0.0
    t0 = time.perf_counter()
    out = gate.run_sampling_memory(cmd, timeout=600, interval=0.02)
    from_start = time.perf_counter() - t0  # the child's whole life: interpreter, imports, report
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    child = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        **child,
        "seconds_after_imports": child["seconds"],
        "seconds": from_start,
        "rss_mb": out.peak_rss_mb,
        "pss_mb": out.peak_pss_mb,
        "cpu": out.cpu_seconds,
        "prometheus_cpu": gate.cpu_seconds(prometheus_pid) - prom0 if prometheus_pid else float("nan"),
        "load": gate.load(),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--disks", type=int, default=100)
    p.add_argument("--baseline", type=int, default=10)
    p.add_argument(
        "--neighbour-runs",
        type=int,
        default=1,
        help="runs of the largest size with a CPU-bound neighbour (default: %(default)s; 0: none)",
    )
    p.add_argument("--against", metavar="REV", help="also run the report code of this git revision, interleaved")
    args = p.parse_args()
    g = gate.Gate("bench/report.py")
    g.calibrate()
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            return g.cannot_measure(f"{tool} not found (make deps)")
    end = int(time.time()) // 60 * 60 - 120
    results = {}
    with tempfile.TemporaryDirectory(prefix="ioparallax-bench-report-") as tmp:
        old_repo = None
        if args.against:
            old_repo = Path(tmp) / "against"
            old_repo.mkdir()
            # Before the one-namespace move the mixin was a top-level package beside ioparallax/.
            tops = subprocess.run(
                ["git", "-C", str(REPO), "ls-tree", "--name-only", args.against],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.split()
            paths = [p for p in ("ioparallax", "mixin") if p in tops]
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.against, *paths], check=True, capture_output=True, timeout=120
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(old_repo)], input=archive, check=True, timeout=120)
        for disks in (args.baseline, args.disks):
            work = Path(tmp) / f"d{disks}"
            work.mkdir()
            t0 = time.perf_counter()
            om = work / "data.om"
            samples = generate(om, disks, end)
            data = work / "data"
            subprocess.run(
                ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(data)],
                check=True,
                capture_output=True,
                timeout=900,
            )
            om.unlink()
            print(
                f"{disks} VM disks: {samples:,} samples generated and loaded in {time.perf_counter() - t0:.0f} s",
                flush=True,
            )
            prom = Prometheus(data, work)
            try:
                runs, old_runs, busy = [], [], []
                for _ in range(args.runs):
                    if old_repo is not None:
                        old_runs.append(run_report(prom.url, end - HOUR, end, old_repo))
                    runs.append(run_report(prom.url, end - HOUR, end, prometheus_pid=prom.proc.pid))
                if disks == args.disks and args.neighbour_runs:
                    with gate.neighbour():
                        busy = [
                            run_report(prom.url, end - HOUR, end, prometheus_pid=prom.proc.pid)
                            for _ in range(args.neighbour_runs)
                        ]
            finally:
                prom.stop()
            if old_runs:
                osecs = [r["seconds"] for r in old_runs]
                nsecs = [r["seconds"] for r in runs]
                print(
                    f"  {args.against}: min {min(osecs):.1f} s, median {statistics.median(osecs):.1f} s, peak RSS "
                    f"{max(r['rss_mb'] for r in old_runs):.0f} MB, HTML {old_runs[0]['html_mb']:.1f} MB; this tree "
                    f"is {statistics.median(osecs) / statistics.median(nsecs):.2f}x faster (median), "
                    f"{min(osecs) / min(nsecs):.2f}x (min), same load",
                    flush=True,
                )
            loads = [r["load"] for r in runs]
            results[disks] = dict(
                seconds=gate.Runs([r["seconds"] for r in runs], loads),
                after_imports=gate.Runs([r["seconds_after_imports"] for r in runs], loads),
                rss=gate.Runs([r["rss_mb"] for r in runs], loads),
                pss=gate.Runs([r["pss_mb"] for r in runs], loads),
                cpu=gate.Runs([r["cpu"] for r in runs], loads),
                prometheus_cpu=gate.Runs([r["prometheus_cpu"] for r in runs], loads),
                queries=runs[0]["queries"],
                disks=runs[0]["disks"],
                html=runs[0]["html_mb"],
            )
            r = results[disks]
            print(
                f"  report: {r['disks']} VM disks, {r['queries']} queries, HTML {r['html']:.1f} MB\n"
                f"    time from process start {r['seconds'].describe('s')}; after the imports "
                f"{r['after_imports'].describe('s')}\n"
                f"    CPU of the report's processes {r['cpu'].describe('s')} = "
                f"{g.calibration.units(r['cpu'].median / disks):,.1f} calibration units per VM disk-hour "
                f"(median; pure-Python kernel), Prometheus' "
                f"{r['prometheus_cpu'].describe('s')}: (report + Prometheus) / {gate.CORES} cores = "
                f"{(r['cpu'].median + r['prometheus_cpu'].median) / gate.CORES:.1f} s, the least wall time "
                f"these cores allow\n"
                f"    peak RSS of the process tree {r['rss'].describe('MB', '.0f')}; "
                f"peak PSS {r['pss'].describe('MB', '.0f')} (shared pages counted once)",
                flush=True,
            )
            if busy:
                b = gate.Runs([x["seconds"] for x in busy], [x["load"] for x in busy])
                m = gate.Runs([x["rss_mb"] for x in busy], [x["load"] for x in busy])
                print(
                    f"    with a CPU-bound neighbour (no target): time {b.describe('s')}, "
                    f"peak RSS {m.describe('MB', '.0f')}",
                    flush=True,
                )
    a, b = results[args.baseline], results[args.disks]
    print(
        f"ratio {args.disks}/{args.baseline} VM disks: time {b['seconds'].median / a['seconds'].median:.1f}x, "
        f"RSS {b['rss'].max / a['rss'].max:.1f}x (medians; max for RSS)"
    )
    g.require(
        f"the same queries for {args.baseline} and {args.disks} VM disks",
        b["queries"] == a["queries"],
        f"{a['queries']} and {b['queries']}",
    )
    g.check(
        f"report of {args.disks} VM disks x 1 h: peak RSS of the process tree",
        b["rss"],
        below=400,
        unit="MB",
        stat="max",
        fmt=".0f",
    )
    # Last, wall time: it depends on the machine and its load (printed beside it).
    g.check(f"report of {args.disks} VM disks x 1 h: time from process start", b["seconds"], below=20, unit="s")
    return g.verdict()


if __name__ == "__main__":
    sys.exit(main())
