#!/usr/bin/env python3
"""Scrape cost of vcenter-exporter against pryorda/vmware_exporter 0.18.4, side by side, and
what a background inventory update costs a probe (issue 24).

For each VM count (``--vms``, default 1,000 then 5,000), one scenario vCenter simulator
(.build/vcsim-scenario, 2 virtual disks per VM) serves every exporter of that run. Its clock runs
faster (-clock-speed 4 up to 1,000 VMs, 1 above, where a round of scrapes takes ~4x longer) so
that every scrape has 1-2 new 20 s samples per disk: ours fetches and integrates
every one of them (15 virtualDisk counters per disk), vmware_exporter takes one sample per VM
(its default metric set).

- **cold**, paired: a fresh process of each, in turn, ``--cold-runs`` times: ours probed with a
  ``--scrape-timeout`` deadline until the first ``vcenter_up 1`` (every answer before it must be
  ``up`` or ``warming_up``, inside the deadline), vmware_exporter's first scrape (login,
  inventory, samples); wall and CPU.
- **steady**, paired: three processes scraped in turn, ``--scrapes`` rounds after a warm-up:
  ours with a cached inventory (``inventory_refresh: 1h``), ours with inventory updates running
  back to back (``inventory_refresh: --update-every``, 0.2 s: a WaitForUpdatesEx every ~0.25 s, so
  every probe overlaps updates), and vmware_exporter; meanwhile an admin session renames one VM
  every ``--churn-every`` seconds, so most updates carry a change (and the updating exporter
  renders its inventory families again).

Printed: min / median wall and CPU with the load average, peak RSS and RSS after scrape 1, 5 and
the last, the simulator's own CPU per scrape (the floor a client can approach), the updates the
updating exporter logged (changes, wall, thread CPU), and the ratios. Targets (exit 1 when one
is missed): cold answers only ``up``/``warming_up`` within the deadline; a probe with updates
running < 1.5x a probe on a cached inventory (medians) and the slowest < 2x that median; ours
>= 4x cheaper than vmware_exporter in wall time and CPU (ratio of the medians) while collecting
more; our RSS growing less than 10 MB from scrape 5 to the last. When vmware_exporter cannot be
installed or run, its ratios cannot be measured: a miss.

``--stock`` makes the steady paired run on stock vcsim instead (``.build/vcsim``, govmomi v0.46.3, a
server neither exporter's authors wrote; issue 34), 1,000 VMs by default: ours on a cached
inventory and vmware_exporter, ``--scrapes`` rounds in turn after a warm-up (no updating exporter,
no churn, no cold starts: those are the scenario run's). Stock vcsim makes one virtual disk a VM,
echoes ``*`` back instead of expanding it (ours then asks for each disk by its instance: with one
disk a VM, the same number of metric ids as ``*``), and computes each answer's samples back from
"now", so that ours reads 1-2 new samples a disk in every scrape, as a scrape interval of 20-40 s
would on a vCenter. Both exporters collect what they collect on any vCenter: the same targets
as the scenario run (>= 4x in wall time and CPU, our RSS growing less than 10 MB).

``--inventory`` measures the inventory at scale instead (issue 15), on stock vcsim (``.build/vcsim``,
5,000 VMs by default), the new behaviour against the old one side by side in the same run:

- refresh cost: one inventory read, in this process (wall, and CPU of the reading thread), the
  old pyvmomi walk against the plain-SOAP read, alternately, ``--runs`` times each; and the
  background builds as the exporter logs them (wall and thread CPU);
- cold start: exporter process started, probes (10 s scrape timeout) until the first
  ``vcenter_up 1``: ``inventory_mode: sync`` (old) against ``background`` (new), twice each,
  with no second refresh competing (``inventory_refresh: 1h``, and 1s for one old start);
- probe wall during a refresh in the old mode: ``inventory_refresh: 1s``, so that it reads the
  inventory in every probe ("refresh forced"), against its probes on a cached inventory
  (``inventory_refresh: 1h``). The new mode's refreshes are WaitForUpdatesEx updates since issue 24:
  what they cost a probe is measured by the default run (above), paired.

vmware_exporter is installed into a throwaway venv under .build/ (never into the project's
deps). It connects to port 443 only (pyVim SmartConnect's default): we start it through a
two-line shim that sets SmartConnect's port to the simulator's free loopback port. Its default
batch (5,000 query specs per QueryPerf) exceeds config.vpxd.stats.maxQueryMetrics=256, which a
real vCenter enforces, so the simulator runs with the limit off; ours still batches by 256. Stock
vcsim has no such limit (and no such option: ours is told 256 in its configuration).
"""

from __future__ import annotations

import argparse
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import requests

import gate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ioparallax.simulators.process import Process, free_port, start  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / ".build"
SIM = BUILD / "vcsim-scenario"
STOCK = BUILD / "vcsim"
THEIR_VENV = BUILD / "vmware-exporter-venv"
THEIR_PACKAGES = ["vmware_exporter==0.18.4", "requests", "twisted==24.7.0"]

SHIM = """
import functools, sys
from pyVim import connect
connect.SmartConnect = functools.partial(connect.SmartConnect, port=int(sys.argv[1]))
from vmware_exporter.vmware_exporter import main
sys.exit(main(['-a', '127.0.0.1', '-p', sys.argv[2]]))
"""


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MB."""
    text = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", text).group(1)) / 1024
    hwm = int(re.search(r"VmHWM:\s+(\d+)", text).group(1)) / 1024
    return rss, hwm


def ensure_vmware_exporter() -> tuple[Path | None, str]:
    """The throwaway venv's python, installing vmware_exporter if missing; (None, why) on failure."""
    py = THEIR_VENV / "bin" / "python"
    check = [str(py), "-c", "import vmware_exporter.vmware_exporter"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return py, ""
    print(f">> installing {' '.join(THEIR_PACKAGES)} into {THEIR_VENV} (throwaway venv)", flush=True)
    r = subprocess.run([sys.executable, "-m", "venv", "--clear", str(THEIR_VENV)], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"cannot create venv: {r.stderr.strip()[-500:]}"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", *THEIR_PACKAGES], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"pip install failed: {r.stderr.strip()[-800:]}"
    if subprocess.run(check, capture_output=True).returncode != 0:
        return None, "vmware_exporter does not import after installation"
    return py, ""


def scrape(url: str, pid: int, sim_pid: int, params: dict | None = None) -> dict:
    cpu0, sim0 = gate.cpu_seconds(pid), gate.cpu_seconds(sim_pid)
    t0 = time.perf_counter()
    r = requests.get(url, params=params, headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"}, timeout=120)
    wall = time.perf_counter() - t0
    r.raise_for_status()
    rss, hwm = memory_mb(pid)
    return {
        "wall": wall,
        "cpu": gate.cpu_seconds(pid) - cpu0,
        "sim_cpu": gate.cpu_seconds(sim_pid) - sim0,
        "rss": rss,
        "hwm": hwm,
        "load": gate.load(),
        "text": r.text,
    }


def summary(name: str, runs: list[dict]) -> dict:
    s = {
        "wall": gate.Runs([r["wall"] for r in runs], [r["load"] for r in runs]),
        "cpu": gate.Runs([r["cpu"] for r in runs], [r["load"] for r in runs]),
        "sim_cpu": statistics.mean(r["sim_cpu"] for r in runs),
        "hwm": max(r["hwm"] for r in runs),
        "rss1": runs[0]["rss"],
        "rss5": runs[min(4, len(runs) - 1)]["rss"],
        "rss_last": runs[-1]["rss"],
        "lines": statistics.mean(sum(1 for ln in r["text"].splitlines() if ln and ln[0] != "#") for r in runs),
    }
    print(
        f"{name:<18} wall {s['wall'].describe('s')}\n{'':<18} cpu {s['cpu'].describe('s')}\n{'':<18} "
        f"peak RSS {s['hwm']:6.1f} MB  RSS after scrape 1/5/{len(runs)}: "
        f"{s['rss1']:.1f}/{s['rss5']:.1f}/{s['rss_last']:.1f} MB  "
        f"simulator cpu {s['sim_cpu']:.3f} s (mean)  samples/scrape {s['lines']:.0f}"
    )
    return s


def _min_med(values: list[float]) -> str:
    """min / median of values measured now (the load average is printed beside each table)."""
    return f"{min(values):7.2f} / {statistics.median(values):7.2f}" if values else "      - /       -"


def _up(text: str) -> bool:
    return re.search(r"^vcenter_up 1(\.0)?$", text, re.M) is not None


def _gauge(text: str, name: str) -> float:
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


def _probe(url: str, params: dict, timeout: float) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = requests.get(
        url, params=params, headers={"X-Prometheus-Scrape-Timeout-Seconds": str(timeout)}, timeout=timeout + 60
    )
    r.raise_for_status()
    return time.perf_counter() - t0, r.text


class Session:
    """One run's temporary directory, the simulator's password, and the processes started in it:
    ``with Session(prefix) as s:`` stops each of them, the last started first, when the block ends."""

    def __init__(self, prefix: str) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix=prefix)
        self.tmpdir = Path(self._dir.name)
        self.password = secrets.token_urlsafe(12)
        self.procs: list[Process] = []

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            for p in reversed(self.procs):
                p.stop(timeout=10)
        finally:
            self._dir.cleanup()

    def start(
        self, name: str, argv: Sequence[str], ready: str, timeout: float, env: dict[str, str] | None = None
    ) -> Process:
        """``argv`` started (log: ``<name>.log`` in the directory), once it printed ``ready``."""
        proc = start(name, argv, self.tmpdir / f"{name}.log", env=env)
        self.procs.append(proc)
        proc.wait_for_output(ready, timeout)
        return proc

    def stop(self, proc: Process) -> None:
        proc.stop(timeout=10)
        self.procs.remove(proc)

    def simulator(self, name: str, binary: Path, listen: str, flags: Sequence[str], ready: str) -> tuple[Process, int]:
        """A simulator with the bench's credentials, listening on a free loopback port (``listen``
        is its flag) and ready; (its process, its port). The time it took is printed by the caller."""
        port = free_port()
        argv = [str(binary), listen, f"127.0.0.1:{port}", "-username", "bench", "-password", self.password, *flags]
        return self.start(name, argv, ready, 1800), port

    def stock_vcsim(self, vms: int) -> tuple[Process, int]:
        """Stock vcsim (``.build/vcsim``) with one datacenter, one cluster of one host, one resource
        pool and ``vms`` VMs of one virtual disk each, ready (its start-up time printed, in no figure)."""
        t0 = time.monotonic()
        flags = ["-dc", "1", "-cluster", "1", "-host", "1", "-standalone-host", "0", "-pg", "0", "-vm", str(vms)]
        sim = self.simulator("vcsim", STOCK, "-l", flags, r"export GOVC_URL=")
        print(f"stock vcsim: {vms} VMs ready in {time.monotonic() - t0:.0f} s (not part of any figure)", flush=True)
        return sim

    def ours(self, name: str, target: str, refresh: str) -> tuple[Process, str]:
        """A vcenter-exporter as the paired runs start it: batches of 256 metrics, the inventory
        refreshed every ``refresh``, info logs (its inventory updates and what the server lacks)."""
        settings = {"max_query_metrics": "256", "inventory_refresh": refresh}
        return self.exporter(name, target, settings, ["--log.level", "info"])

    def vmware_exporter(self, name: str, python: Path, sim_port: int) -> tuple[Process, str]:
        """vmware_exporter (``python``: its venv's) reading the simulator on ``sim_port`` through
        the shim, with the bench's credentials, listening; (its process, its /metrics URL)."""
        port = free_port()
        env = {
            "VSPHERE_HOST": "127.0.0.1",
            "VSPHERE_USER": "bench",
            "VSPHERE_PASSWORD": self.password,
            "VSPHERE_IGNORE_SSL": "True",
        }
        argv = [str(python), "-c", SHIM, str(sim_port), str(port)]
        proc = self.start(name, argv, r"Starting web server", 60, env=env)
        return proc, f"http://127.0.0.1:{port}/metrics"

    def exporter(
        self, name: str, target: str, settings: dict[str, str], args: Sequence[str] = ()
    ) -> tuple[Process, str]:
        """A vcenter-exporter reading ``target`` with the bench's credentials and ``settings`` (config
        keys of its defaults), listening; (its process, its /probe URL)."""
        cfg = self.tmpdir / f"{name}.yml"
        keys = "".join(f"  {k}: {v}\n" for k, v in settings.items())
        cfg.write_text(
            "defaults:\n  username: bench\n  password_env: BENCH_VC_PASSWORD\n"
            f"  insecure_skip_verify: true\n{keys}targets:\n  {target}: {{}}\n"
        )
        port = free_port()
        argv = [
            str(REPO / ".venv" / "bin" / "vcenter-exporter"),
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--config.file",
            str(cfg),
            *args,
        ]
        proc = self.start(name, argv, r"listening on", 30, env={"BENCH_VC_PASSWORD": self.password})
        return proc, f"http://127.0.0.1:{port}/probe"


def inventory_bench(args: argparse.Namespace) -> int:
    """See the module's docstring (``--inventory``)."""
    import ssl

    from pyVim.connect import Disconnect, SmartConnect

    sys.path.insert(0, str(REPO))
    from ioparallax.exporters.vcenter.inventory import collect_inventory, collect_inventory_soap
    from ioparallax.exporters.vcenter.inventory_watch import InventoryWatch

    if not STOCK.exists() or STOCK.stat().st_size == 0:
        print(f"{STOCK} is missing: run `make deps-go`", file=sys.stderr)
        return 1
    vms = args.vms if args.vms_given else 5000
    with Session("vcenter-inventory-bench-") as session:
        password = session.password
        _, sim_port = session.stock_vcsim(vms)
        target = f"127.0.0.1:{sim_port}"

        # -- refresh cost, in this process ------------------------------------------------
        si = SmartConnect(
            host="127.0.0.1", port=sim_port, user="bench", pwd=password, sslContext=ssl._create_unverified_context()
        )
        cost: dict[str, list[tuple[float, float]]] = {"old": [], "new": [], "watch": [], "update": []}

        def watch_full(si: object) -> list:
            watch = InventoryWatch("bench")
            inv = watch.read(si).inventory or []
            w0, c0 = time.perf_counter(), time.thread_time()
            assert watch.read(si).inventory is None  # nothing changed
            cost["update"].append((time.perf_counter() - w0, time.thread_time() - c0))
            return inv

        try:
            for _ in range(args.runs):
                for side, read in (
                    ("old", collect_inventory),
                    ("new", collect_inventory_soap),
                    ("watch", watch_full),
                ):
                    w0, c0 = time.perf_counter(), time.thread_time()
                    inv = read(si)
                    cost[side].append((time.perf_counter() - w0, time.thread_time() - c0))
                    assert len(inv) == vms, (side, len(inv))
                    if side == "watch":  # the update it made is not part of the full read
                        cost[side][-1] = tuple(a - b for a, b in zip(cost[side][-1], cost["update"][-1]))
        finally:
            Disconnect(si)
        print(f"\none inventory read of {vms} VMs, {args.runs} runs each, min / median:")
        print(f"{'':<32} {'wall s':>17} {'client CPU s':>17}")
        for side, label in (
            ("old", "old: pyvmomi objects"),
            ("new", "new: plain SOAP + lxml"),
            ("watch", "full read by WaitForUpdatesEx"),
            ("update", "an update, nothing changed"),
        ):
            print(f"{label:<32} {_min_med([w for w, _ in cost[side]])} {_min_med([c for _, c in cost[side]])}")
        old_w, new_w = (statistics.median(w for w, _ in cost[k]) for k in ("old", "new"))
        old_c, new_c = (statistics.median(c for _, c in cost[k]) for k in ("old", "new"))
        print(f"ratio old / new (medians): wall {old_w / new_w:.1f}x, client CPU {old_c / new_c:.1f}x", flush=True)

        # -- exporter processes: cold start and probe wall during a refresh -----------------
        def start_exporter(name: str, mode: str, refresh: str) -> tuple[Process, str]:
            return session.exporter(name, target, {"inventory_mode": mode, "inventory_refresh": refresh})

        first_answers: list[tuple[str, float, str]] = []  # background mode: (mode, wall, kind or "up")

        def cold_start(proc: Process, url: str, mode: str = "") -> tuple[float, float]:
            """(wall, exporter CPU) from the first probe to the first vcenter_up 1."""
            t0, c0 = time.perf_counter(), gate.cpu_seconds(proc.pid)
            while True:
                wall, text = _probe(url, {"target": target}, 10.0)
                if mode:
                    kind = re.search(r'^vcenter_probe_error_info\{[^}]*kind="([^"]+)"', text, re.M)
                    first_answers.append((mode, wall, "up" if _up(text) else kind.group(1) if kind else "?"))
                if _up(text):
                    return time.perf_counter() - t0, gate.cpu_seconds(proc.pid) - c0
                if time.perf_counter() - t0 > 900:
                    raise TimeoutError(f"{proc.name}: no vcenter_up 1 in 900 s: {text[-600:]}")

        stop = session.stop
        cold: dict[str, list[tuple[float, float]]] = {"sync": [], "background": []}
        probes: dict[str, list[float]] = {"cached": [], "forced": []}

        proc, url = start_exporter("sync-cached", "sync", "1h")
        cold["sync"].append(cold_start(proc, url))
        failed = 0

        def timed_up(url: str) -> float | None:
            """Wall of one probe, None (and counted) when it did not answer vcenter_up 1."""
            nonlocal failed
            wall, text = _probe(url, {"target": target}, 60.0)
            if _up(text):
                return wall
            failed += 1
            print(f"  probe not up ({wall:.2f} s): {re.findall(r'^vcenter_probe_error_info.*$', text, re.M)}")
            return None

        for _ in range(args.probes):
            probes["cached"] += [w for w in [timed_up(url)] if w is not None]
        stop(proc)

        proc, url = start_exporter("sync-forced", "sync", "1s")
        cold["sync"].append(cold_start(proc, url))
        for _ in range(args.probes):
            time.sleep(1.0)  # the inventory is due again: this probe reads it, as the old code did
            probes["forced"] += [w for w in [timed_up(url)] if w is not None]
        stop(proc)

        def builds_of(proc: Process) -> list[tuple[float, float]]:
            return [
                (float(m.group(1)), float(m.group(2)))
                for m in re.finditer(
                    r"inventory of target=\S+ read: \d+ VMs, \d+ disks in ([\d.]+)s \(([\d.]+)s CPU[,)]",
                    proc.log_text(),
                )
            ]

        # cold start with no second refresh competing (inventory_refresh 1h, as sync-cached)
        first_builds: list[tuple[float, float]] = []
        for i in range(2):
            proc, url = start_exporter(f"background-cold-{i}", "background", "1h")
            cold["background"].append(cold_start(proc, url, "background"))
            first_builds += builds_of(proc)[:1]
            stop(proc)

        print(f"\nexporter process against the same {vms}-VM vcsim, min / median:")
        print(f"cold start, first probe to the first vcenter_up 1 ({len(cold['sync'])} starts each):")
        print(f"{'':<32} {'wall s':>17} {'exporter CPU s':>17}")
        for mode, label in (("sync", "old: inventory in the probe"), ("background", "new: background")):
            print(f"{label:<32} {_min_med([w for w, _ in cold[mode]])} {_min_med([c for _, c in cold[mode]])}")
        sw, bw = (statistics.median(w for w, _ in cold[k]) for k in ("sync", "background"))
        sc, bc = (statistics.median(c for _, c in cold[k]) for k in ("sync", "background"))
        print(f"ratio old / new (medians): wall {sw / bw:.1f}x, exporter CPU {sc / bc:.1f}x")
        print(
            f"background inventory builds in the exporter, first (cold, alone) ({len(first_builds)}): "
            f"wall {_min_med([w for w, _ in first_builds])} s, thread CPU {_min_med([c for _, c in first_builds])} s"
        )
        print("probe wall, s:")
        for key, label in (
            ("forced", "old, refresh in the probe"),
            ("cached", "old, cached inventory"),
        ):
            print(f"  {label:<30} {_min_med(probes[key])}  ({len(probes[key])} probes)")
        if failed:
            print(f"  ({failed} probes of the old mode did not answer vcenter_up 1 and are left out)")
        print(f"(load average now {gate.load():.1f} on {gate.CORES} cores)")
        g = gate.Gate("bench/vcenter_scrape.py --inventory")
        g.calibrate()
        kinds = Counter(k for _, _, k in first_answers)
        g.require(
            "cold start, background mode: every probe answered (vcenter_up 1, or warming_up before the first "
            "up) within its 10 s deadline",
            bool(first_answers) and set(kinds) <= {"up", "warming_up"} and max(w for _, w, _ in first_answers) < 10.0,
            f"{dict(kinds)}, slowest {max((w for _, w, _ in first_answers), default=float('nan')):.2f} s",
        )
        if probes["forced"] and probes["cached"]:
            f_med, c_med = statistics.median(probes["forced"]), statistics.median(probes["cached"])
            print(f"ratio old, refresh in the probe / old, cached inventory (medians): {f_med / c_med:.1f}x")
        return g.verdict()


class Churn:
    """An admin session renaming one VM of the simulator every ``every`` seconds (a name change is
    the commonest inventory change), in a thread: the exporter that watches for updates then finds
    one change in most of its refreshes and renders its inventory families again."""

    def __init__(self, port: int, password: str, every: float = 1.0) -> None:
        import ssl
        import threading

        from pyVim.connect import SmartConnect
        from pyVmomi import vim

        self.si = SmartConnect(
            host="127.0.0.1", port=port, user="bench", pwd=password, sslContext=ssl._create_unverified_context()
        )
        content = self.si.content
        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
        self.vms = list(view.view)[:20]
        view.Destroy()
        self.every, self.renames = every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            vm = self.vms[self.renames % len(self.vms)]
            task = vm.Rename_Task(f"churn-{self.renames:05d}")
            while task.info.state not in ("success", "error") and not self._stop.is_set():
                time.sleep(0.05)
            self.renames += 1

    def stop(self) -> None:
        from pyVim.connect import Disconnect

        self._stop.set()
        self._thread.join(timeout=10)
        Disconnect(self.si)


def update_lines(proc: Process) -> list[tuple[int, float, float]]:
    """(changes, wall, thread CPU) of each inventory update the exporter logged."""
    return [
        (int(m.group(1)), float(m.group(2)), float(m.group(3)))
        for m in re.finditer(
            r"inventory of target=\S+ updated: (\d+) changes .*? in ([\d.]+)s \(([\d.]+)s CPU", proc.log_text()
        )
    ]


def warm_up(proc: Process, url: str, target: str) -> None:
    """Probe until the first ``vcenter_up 1`` (login, first inventory, counter look-up), 900 s at most."""
    t0 = time.perf_counter()
    while not _up(_probe(url, {"target": target}, 60.0)[1]):
        if time.perf_counter() - t0 > 900:
            raise TimeoutError(f"{proc.name}: no vcenter_up 1 in 900 s")


#: An exporter scraped in the paired rounds: its process, its URL and the query parameters.
Side = tuple[Process, str, dict | None]


def rounds(count: int, pause: float, sim_pid: int, sides: list[Side]) -> list[list[dict]]:
    """``count`` rounds, each after ``pause`` seconds: every side (process, URL, query parameters)
    scraped once, in turn, so that all sides meet the same load; the scrapes of each side."""
    out: list[list[dict]] = [[] for _ in sides]
    for _ in range(count):
        time.sleep(pause)
        for runs, (proc, url, params) in zip(out, sides):
            runs.append(scrape(url, proc.pid, sim_pid, params))
    return out


def new_samples(runs: list[dict]) -> float:
    """Mean 20 s disk samples our exporter integrated per scrape (``vcenter_perf_new_samples``)."""
    return statistics.mean(_gauge(r["text"], "vcenter_perf_new_samples") for r in runs)


def rss_growth(g: gate.Gate, label: str, ours: dict, scrapes: int) -> None:
    g.check(f"{label}: our RSS growth from scrape 5 to {scrapes}", ours["rss_last"] - ours["rss5"], below=10, unit="MB")


def compare(g: gate.Gate, label: str, ours: dict, theirs: dict) -> None:
    """vmware_exporter's steady scrapes against ours (summaries of scrapes in turn, under the same
    load: the ratios are the load-fair figures), with the simulator's CPU and the memory; target:
    ours >= 4x cheaper in wall time and CPU."""
    print(
        f"simulator CPU per scrape (the floor): ours {ours['sim_cpu']:.3f} s, "
        f"vmware_exporter {theirs['sim_cpu']:.3f} s; vmware_exporter's RSS growth from scrape 5: "
        f"{theirs['rss_last'] - theirs['rss5']:+.1f} MB; peak RSS ratio vmware_exporter / ours "
        f"{theirs['hwm'] / ours['hwm']:.1f}x"
    )
    for kind, name in (("wall", "wall"), ("cpu", "CPU")):
        g.check_ratio(f"{label}: {name} ratio vmware_exporter / ours (medians)", theirs[kind], ours[kind], at_least=4)


def stock_paired(args: argparse.Namespace, vms: int, their_py: Path | None, why_not: str, g: gate.Gate) -> None:
    """Stock vcsim of ``vms`` VMs: steady scrapes of ours (cached inventory) and vmware_exporter in
    turn (see the docstring, ``--stock``)."""
    if their_py is None:
        g.cannot_measure(f"vmware_exporter could not be run: {why_not}")
        return
    with Session("vcenter-stock-bench-") as session:
        sim, sim_port = session.stock_vcsim(vms)
        target = f"127.0.0.1:{sim_port}"
        ours = session.ours("ours-steady", target, "1h")
        warm_up(*ours, target)
        theirs = session.vmware_exporter("theirs", their_py, sim_port)
        scrape(theirs[1], theirs[0].pid, sim.pid)  # warm-up: its first login and inventory
        ours_runs, their_runs = rounds(
            args.scrapes, args.pause, sim.pid, [(*ours, {"target": target}), (*theirs, None)]
        )
        echoed = "does not expand instance '*'" in ours[0].log_text()
        print(f"\nsteady on stock vcsim, {vms} VMs x 1 disk, {args.scrapes} scrapes each in turn:")
        s_ours = summary("ours", ours_runs)
        print(
            f"{'':<18} integrated {new_samples(ours_runs):.0f} new 20 s disk samples per scrape (x 15 counters); "
            + ("'*' echoed back: disks asked for one by one" if echoed else "'*' expanded by the server")
        )
        rss_growth(g, f"stock vcsim, {vms} VMs", s_ours, args.scrapes)
        compare(g, f"stock vcsim, {vms} VMs", s_ours, summary("vmware_exporter", their_runs))


def paired(args: argparse.Namespace, vms: int, their_py: Path | None, why_not: str, g: gate.Gate) -> None:
    """One simulator of ``vms`` VMs: cold starts and steady scrapes of both exporters in turn, and
    our probes with inventory updates running against our probes without (see the docstring)."""
    churn: Churn | None = None
    with Session("vcenter-bench-") as session:
        password = session.password
        try:
            t0 = time.monotonic()
            flags = ["-vms", str(vms), "-disks-per-vm", str(args.disks_per_vm), "-max-query-metrics", "0"]
            flags += ["-clock-speed", str(args.clock_speed or (4.0 if vms <= 1000 else 1.0))]
            sim, sim_port = session.simulator("vcsim-scenario", SIM, "-listen", flags, r"listening https://")
            print(
                f"\n== {vms} VMs x {args.disks_per_vm} disks: simulator ready in {time.monotonic() - t0:.1f} s",
                flush=True,
            )
            target = f"127.0.0.1:{sim_port}"

            def start_ours(name: str, refresh: str) -> tuple[Process, str]:
                return session.ours(name, target, refresh)

            def start_theirs(name: str) -> tuple[Process, str]:
                assert their_py is not None
                return session.vmware_exporter(name, their_py, sim_port)

            stop = session.stop

            # -- cold, paired: a fresh process each, ours then theirs, --cold-runs times ----------
            cold_ours: list[tuple[float, float, float]] = []  # (to first up, first probe wall, CPU)
            cold_theirs: list[tuple[float, float]] = []  # (first scrape wall, CPU)
            kinds: Counter = Counter()
            slowest_answer = 0.0
            for i in range(args.cold_runs):
                proc, url = start_ours(f"ours-cold-{i}", "1h")
                t0, c0, first = time.perf_counter(), gate.cpu_seconds(proc.pid), None
                while True:
                    wall, text = _probe(url, {"target": target}, args.scrape_timeout)
                    first = wall if first is None else first
                    slowest_answer = max(slowest_answer, wall)
                    kind = re.search(r'^vcenter_probe_error_info\{[^}]*kind="([^"]+)"', text, re.M)
                    kinds["up" if _up(text) else kind.group(1) if kind else "?"] += 1
                    if _up(text):
                        break
                    if time.perf_counter() - t0 > 900:
                        raise TimeoutError(f"ours: no vcenter_up 1 in 900 s: {text[-600:]}")
                cold_ours.append((time.perf_counter() - t0, first, gate.cpu_seconds(proc.pid) - c0))
                stop(proc)
                if their_py is not None:
                    proc, url = start_theirs(f"theirs-cold-{i}")
                    c0 = gate.cpu_seconds(proc.pid)
                    r = scrape(url, proc.pid, sim.pid)
                    cold_theirs.append((r["wall"], gate.cpu_seconds(proc.pid) - c0))
                    stop(proc)
            load_now = gate.load()
            print(
                f"cold start, a fresh process each, {args.cold_runs} starts each, min / median (load {load_now:.1f}):"
            )
            print(f"  {'':<44} {'wall s':>17} {'CPU s':>17}")
            print(
                f"  {'ours: first probe to the first vcenter_up 1':<44} {_min_med([w for w, _, _ in cold_ours])} "
                f"{_min_med([c for _, _, c in cold_ours])}"
            )
            print(f"  {'ours: the first probe answered in':<44} {_min_med([f for _, f, _ in cold_ours])}")
            if cold_theirs:
                print(
                    f"  {'vmware_exporter: its first scrape':<44} {_min_med([w for w, _ in cold_theirs])} "
                    f"{_min_med([c for _, c in cold_theirs])}"
                )
                ratio = statistics.median(w for w, _ in cold_theirs) / statistics.median(w for w, _, _ in cold_ours)
                print(f"  ratio vmware_exporter first scrape / our first vcenter_up 1 (medians): {ratio:.1f}x")
            g.require(
                f"{vms} VMs, cold: every probe before the first vcenter_up 1 answered up or warming_up within "
                f"its {args.scrape_timeout:g} s deadline",
                set(kinds) <= {"up", "warming_up"} and slowest_answer < args.scrape_timeout + 1.0,
                f"{dict(kinds)}, slowest {slowest_answer:.2f} s",
            )

            # -- steady, paired: ours (cached inventory), ours (updates running), theirs ---------
            steady, updating = start_ours("ours-steady", "1h"), start_ours("ours-updating", f"{args.update_every:g}s")
            theirs = start_theirs("theirs") if their_py is not None else None
            for proc, url in (steady, updating):
                warm_up(proc, url, target)
            if theirs is not None:
                scrape(theirs[1], theirs[0].pid, sim.pid)
            ours_side: list[Side] = [(*steady, {"target": target}), (*updating, {"target": target})]
            their_side: list[Side] = [(*theirs, None)] if theirs is not None else []
            ours_runs, upd_runs, *their = rounds(args.scrapes, args.pause, sim.pid, ours_side + their_side)
            # then only ours, with one VM renamed every --churn-every seconds: updates with a change
            churn = Churn(sim_port, password, args.churn_every)
            churn_ours, churn_upd = rounds(args.churn_scrapes, args.pause, sim.pid, ours_side)
            churn.stop()
            renames, churn = churn.renames, None
            updates = update_lines(updating[0])

            print(f"steady, {args.scrapes} scrapes each in turn (no inventory change):")
            s_ours = summary("ours, cached", ours_runs)
            print(f"{'':<18} integrated {new_samples(ours_runs):.0f} new 20 s disk samples per scrape (x 15 counters)")
            summary("ours, updating", upd_runs)
            rss_growth(g, f"{vms} VMs", s_ours, args.scrapes)

            def overlap(label: str, cached: list[dict], updated: list[dict]) -> None:
                med = statistics.median(r["wall"] for r in cached)
                g.check(
                    f"{vms} VMs, {label}: probe with inventory updates running / on a cached inventory (medians)",
                    statistics.median(u["wall"] for u in updated) / med,
                    below=1.5,
                    unit="x",
                )
                g.check(
                    f"{vms} VMs, {label}: slowest probe with updates running / median on a cached inventory",
                    gate.of([u["wall"] / med for u in updated]),
                    below=2,
                    unit="x",
                    stat="max",
                )

            overlap("no change", ours_runs, upd_runs)
            print(
                f"then {args.churn_scrapes} scrapes of ours each in turn, one VM renamed every {args.churn_every:g} s "
                f"({renames} renames):"
            )
            summary("ours, cached", churn_ours)
            summary("ours, updating", churn_upd)
            print(
                f"{'':<18} inventory_refresh {args.update_every:g}s: {len(updates)} updates with changes logged "
                f"({sum(c for c, _, _ in updates)} changes), wall {_min_med([w for _, w, _ in updates])} s, "
                f"thread CPU {_min_med([c for _, _, c in updates])} s (the wall is the simulator's: see docs/vcenter.md)"
            )
            overlap("VMs renamed", churn_ours, churn_upd)
            if theirs is None:
                g.cannot_measure(f"vmware_exporter could not be run: {why_not}")
                return
            compare(g, f"{vms} VMs", s_ours, summary("vmware_exporter", their[0]))
        finally:
            if churn is not None:
                churn.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--inventory",
        action="store_true",
        help="measure the inventory at scale on stock vcsim instead (see above; --vms defaults to 5000)",
    )
    ap.add_argument(
        "--stock",
        action="store_true",
        help="the paired steady run on stock vcsim instead (see above; --vms defaults to 1000)",
    )
    ap.add_argument("--bench-deps", action="store_true", help="only install vmware_exporter into its venv, then exit")
    ap.add_argument("--runs", type=int, default=3, help="--inventory: inventory reads per side (default 3)")
    ap.add_argument("--probes", type=int, default=3, help="--inventory: probes per measurement (default 3)")
    ap.add_argument(
        "--vms",
        default=None,
        help="VMs in the simulator, comma-separated for several runs (default 1000,5000; 1000 with --stock, 5000 with --inventory)",
    )
    ap.add_argument("--disks-per-vm", type=int, default=2)
    ap.add_argument("--scrapes", type=int, default=12, help="steady scrapes of each exporter per VM count")
    ap.add_argument("--cold-runs", type=int, default=2, help="cold starts of each exporter per VM count")
    ap.add_argument("--scrape-timeout", type=float, default=10.0, help="our probes' deadline in the cold starts")
    ap.add_argument("--update-every", type=float, default=0.2, help="inventory_refresh of the updating exporter (s)")
    ap.add_argument("--churn-every", type=float, default=3.0, help="seconds between two VM renames (churn phase)")
    ap.add_argument("--churn-scrapes", type=int, default=8, help="rounds of our two exporters while VMs are renamed")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between rounds")
    ap.add_argument(
        "--clock-speed",
        type=float,
        default=None,
        help="simulated seconds per real second (default 4 up to 1,000 VMs, 1 above): a round of the "
        "steady scrapes takes ~8 s at 1,000 VMs and ~30 s at 5,000 (vmware_exporter's scrape is most of "
        "it), so each of our scrapes has 1-2 new 20 s samples per disk to integrate at either count",
    )
    args = ap.parse_args()
    if args.bench_deps:
        py, why = ensure_vmware_exporter()
        print(py or why)
        return 0 if py else 1
    args.vms_given = args.vms is not None
    if args.inventory:
        args.vms = int(args.vms) if args.vms_given else 5000
        return inventory_bench(args)
    counts = [int(v) for v in (args.vms or ("1000" if args.stock else "1000,5000")).split(",")]
    server = STOCK if args.stock else SIM
    if not server.exists() or server.stat().st_size == 0:
        print(f"{server} is missing: run `make deps-go`", file=sys.stderr)
        return 1
    their_py, why_not = ensure_vmware_exporter()
    g = gate.Gate("bench/vcenter_scrape.py" + (" --stock" if args.stock else ""))
    g.calibrate()
    for vms in counts:
        (stock_paired if args.stock else paired)(args, vms, their_py, why_not, g)
    return g.verdict()


if __name__ == "__main__":
    sys.exit(main())
