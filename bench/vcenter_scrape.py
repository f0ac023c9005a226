#!/usr/bin/env python3
"""Scrape cost of vcenter-exporter against pryorda/vmware_exporter 0.18.4, side by side.

One scenario vCenter simulator (.build/vcsim-scenario) with 1,000 VMs x 2 virtual disks serves
both exporters in the same run. The simulator's clock runs faster (-clock-speed 4) so that
every scrape has new 20 s samples: ours fetches and integrates every one of them (15 virtualDisk
counters per disk), vmware_exporter takes one sample per VM (its default metric set).

Printed: wall time and CPU per scrape of each exporter (min / median of 20 scrapes after one
warm-up, with the load average), peak RSS and RSS after scrape 5 and 20 (memory flat?), the
simulator's own CPU per scrape (the floor a client can approach), and the ratios. Targets (exit 1
when one is missed; both exporters scrape in turn, under the same load): ours >= 4x cheaper in
wall time and CPU (ratio of the medians) while collecting more, memory flat (RSS growth from
scrape 5 to the last under 10 MB). When vmware_exporter cannot be installed, the ratios cannot be
measured: a miss.

``--inventory`` measures the inventory at scale instead (issue 15), on stock vcsim (``.build/vcsim``,
5,000 VMs by default), the new behaviour against the old one side by side in the same run:

- refresh cost: one inventory read, in this process (wall, and CPU of the reading thread), the
  old pyvmomi walk against the plain-SOAP read, alternately, ``--runs`` times each; and the
  background builds as the exporter logs them (wall and thread CPU);
- cold start: exporter process started, probes (10 s scrape timeout) until the first
  ``vcenter_up 1``: ``inventory_mode: sync`` (old) against ``background`` (new), twice each,
  with no second refresh competing (``inventory_refresh: 1h``, and 1s for one old start);
- probe wall during a refresh: ``inventory_refresh: 1s``, so that the old mode reads the inventory
  in every probe ("refresh forced") and the new one has refreshes running back to back in the
  background (probes counted only when the inventory was older than 1 s, i.e. a refresh was under
  way); the old mode's probes on a cached inventory (``inventory_refresh: 1h``) for reference.

vmware_exporter is installed into a throwaway venv under .build/ (never into the project's
deps). It connects to port 443 only (pyVim SmartConnect's default): we start it through a
two-line shim that sets SmartConnect's port to the simulator's free loopback port. Its default
batch (5,000 query specs per QueryPerf) exceeds config.vpxd.stats.maxQueryMetrics=256, which a
real vCenter enforces, so the simulator runs with the limit off; ours still batches by 256.
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


def inventory_bench(args: argparse.Namespace) -> int:
    """See the module's docstring (``--inventory``)."""
    import ssl

    from pyVim.connect import Disconnect, SmartConnect

    sys.path.insert(0, str(REPO))
    from ioparallax.exporters.vcenter.inventory import collect_inventory
    from ioparallax.exporters.vcenter.inventory_soap import collect_inventory_soap

    if not STOCK.exists() or STOCK.stat().st_size == 0:
        print(f"{STOCK} is missing: run `make deps-go`", file=sys.stderr)
        return 1
    vms = args.vms if args.vms_given else 5000
    password = secrets.token_urlsafe(12)
    procs: list[Process] = []
    with tempfile.TemporaryDirectory(prefix="vcenter-inventory-bench-") as tmp:
        tmpdir = Path(tmp)
        try:
            sim_port = free_port()
            # one cluster, one host, one resource pool: -vm N gives N VMs (one disk each)
            sim = start(
                "vcsim",
                [
                    str(STOCK),
                    "-l",
                    f"127.0.0.1:{sim_port}",
                    "-username",
                    "bench",
                    "-password",
                    password,
                    "-dc",
                    "1",
                    "-cluster",
                    "1",
                    "-host",
                    "1",
                    "-standalone-host",
                    "0",
                    "-pg",
                    "0",
                    "-vm",
                    str(vms),
                ],
                tmpdir / "vcsim.log",
            )
            procs.append(sim)
            t0 = time.monotonic()
            sim.wait_for_output(r"export GOVC_URL=", 1800)
            print(f"stock vcsim: {vms} VMs ready in {time.monotonic() - t0:.0f} s (not part of any figure)", flush=True)
            target = f"127.0.0.1:{sim_port}"

            # -- refresh cost, in this process ------------------------------------------------
            si = SmartConnect(
                host="127.0.0.1", port=sim_port, user="bench", pwd=password, sslContext=ssl._create_unverified_context()
            )
            cost: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
            try:
                for _ in range(args.runs):
                    for side, read in (("old", collect_inventory), ("new", collect_inventory_soap)):
                        w0, c0 = time.perf_counter(), time.thread_time()
                        inv = read(si)
                        cost[side].append((time.perf_counter() - w0, time.thread_time() - c0))
                        assert len(inv) == vms, (side, len(inv))
            finally:
                Disconnect(si)
            print(f"\none inventory read of {vms} VMs, {args.runs} runs each, min / median:")
            print(f"{'':<32} {'wall s':>17} {'client CPU s':>17}")
            for side, label in (("old", "old: pyvmomi objects"), ("new", "new: plain SOAP + lxml")):
                print(f"{label:<32} {_min_med([w for w, _ in cost[side]])} {_min_med([c for _, c in cost[side]])}")
            old_w, new_w = (statistics.median(w for w, _ in cost[k]) for k in ("old", "new"))
            old_c, new_c = (statistics.median(c for _, c in cost[k]) for k in ("old", "new"))
            print(f"ratio old / new (medians): wall {old_w / new_w:.1f}x, client CPU {old_c / new_c:.1f}x", flush=True)

            # -- exporter processes: cold start and probe wall during a refresh -----------------
            def start_exporter(name: str, mode: str, refresh: str) -> tuple[Process, str]:
                cfg = tmpdir / f"{name}.yml"
                cfg.write_text(
                    "defaults:\n  username: bench\n  password_env: BENCH_VC_PASSWORD\n"
                    f"  insecure_skip_verify: true\n  inventory_mode: {mode}\n"
                    f"  inventory_refresh: {refresh}\ntargets:\n  {target}: {{}}\n"
                )
                port = free_port()
                proc = start(
                    name,
                    [
                        str(REPO / ".venv" / "bin" / "vcenter-exporter"),
                        "--web.listen-address",
                        f"127.0.0.1:{port}",
                        "--config.file",
                        str(cfg),
                    ],
                    tmpdir / f"{name}.log",
                    env={"BENCH_VC_PASSWORD": password},
                )
                procs.append(proc)
                proc.wait_for_output(r"listening on", 30)
                return proc, f"http://127.0.0.1:{port}/probe"

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

            def stop(proc: Process) -> None:
                proc.stop(timeout=10)
                procs.remove(proc)

            cold: dict[str, list[tuple[float, float]]] = {"sync": [], "background": []}
            probes: dict[str, list[float]] = {"cached": [], "forced": [], "background": []}
            builds: list[tuple[float, float]] = []

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

            # refreshes back to back (inventory_refresh 1s) while probes run
            for i in range(1):
                proc, url = start_exporter(f"background-{i}", "background", "1s")
                cold_start(proc, url)
                met = 0
                deadline = time.monotonic() + 120
                while met < 2 * args.probes and time.monotonic() < deadline:
                    wall, text = _probe(url, {"target": target}, 60.0)
                    if _up(text) and _gauge(text, "vcenter_inventory_age_seconds") > 1.0:
                        probes["background"].append(wall)  # a refresh was due, so under way
                        met += 1
                    time.sleep(0.5)
                builds += builds_of(proc)[1:]  # those that ran while probes were made
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
            print(
                f"background inventory builds in the exporter, while probes ran ({len(builds)}): "
                f"wall {_min_med([w for w, _ in builds])} s, thread CPU {_min_med([c for _, c in builds])} s"
            )
            print("probe wall, s:")
            for key, label in (
                ("forced", "old, refresh in the probe"),
                ("background", "new, during a refresh"),
                ("cached", "old, cached inventory"),
            ):
                print(f"  {label:<30} {_min_med(probes[key])}  ({len(probes[key])} probes)")
            if failed:
                print(f"  ({failed} probes of the old mode did not answer vcenter_up 1 and are left out)")
            print(f"(load average now {gate.load():.1f} on {gate.CORES} cores)")
            g = gate.Gate("bench/vcenter_scrape.py --inventory")
            kinds = Counter(k for _, _, k in first_answers)
            g.require(
                "cold start, background mode: every probe before the first vcenter_up 1 answered warming_up, "
                "within its 10 s deadline",
                bool(first_answers)
                and set(kinds) <= {"up", "warming_up"}
                and max(w for _, w, _ in first_answers) < 10.0,
                f"{dict(kinds)}, slowest {max((w for _, w, _ in first_answers), default=float('nan')):.2f} s",
            )
            if not probes["background"] or not probes["cached"]:
                return g.cannot_measure("no probe met a background refresh, or no probe on a cached inventory")
            f_med, b_med = statistics.median(probes["forced"]), statistics.median(probes["background"])
            c_med = statistics.median(probes["cached"])
            print(f"ratio old with refresh / new during a refresh (medians): {f_med / b_med:.1f}x")
            # Both measured in this run, against the same vcsim: the ratio is the load-fair figure.
            g.check(
                "probe during a background refresh / on a cached inventory (medians)", b_med / c_med, below=2, unit="x"
            )
            g.check(
                "slowest probe during a background refresh / median on a cached inventory",
                max(probes["background"]) / c_med,
                below=2,
                unit="x",
            )
            return g.verdict()
        finally:
            for p in reversed(procs):
                p.stop(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--inventory",
        action="store_true",
        help="measure the inventory at scale on stock vcsim instead (see above; --vms defaults to 5000)",
    )
    ap.add_argument("--runs", type=int, default=3, help="--inventory: inventory reads per side (default 3)")
    ap.add_argument("--probes", type=int, default=3, help="--inventory: probes per measurement (default 3)")
    ap.add_argument("--vms", type=int, default=None, help="VMs in the simulator (default 1000; 5000 with --inventory)")
    ap.add_argument("--disks-per-vm", type=int, default=2)
    ap.add_argument("--scrapes", type=int, default=20)
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between rounds")
    ap.add_argument(
        "--clock-speed",
        type=float,
        default=4.0,
        help="simulated seconds per real second; a round of both scrapes takes ~8 s, so 4 gives "
        "~30 simulated seconds (1-2 new 20 s samples) between our scrapes",
    )
    args = ap.parse_args()
    args.vms_given = args.vms is not None
    if args.inventory:
        return inventory_bench(args)
    if args.vms is None:
        args.vms = 1000
    if not SIM.exists() or SIM.stat().st_size == 0:
        print(f"{SIM} is missing: run `make deps-go`", file=sys.stderr)
        return 1
    their_py, why_not = ensure_vmware_exporter()

    password = secrets.token_urlsafe(12)
    procs: list[Process] = []
    with tempfile.TemporaryDirectory(prefix="vcenter-bench-") as tmp:
        tmpdir = Path(tmp)
        try:
            sim_port = free_port()
            sim = start(
                "vcsim-scenario",
                [
                    str(SIM),
                    "-vms",
                    str(args.vms),
                    "-disks-per-vm",
                    str(args.disks_per_vm),
                    "-listen",
                    f"127.0.0.1:{sim_port}",
                    "-username",
                    "bench",
                    "-password",
                    password,
                    "-clock-speed",
                    str(args.clock_speed),
                    "-max-query-metrics",
                    "0",
                ],
                tmpdir / "vcsim-scenario.log",
            )
            procs.append(sim)
            t0 = time.monotonic()
            sim.wait_for_output(r"listening https://", 600)
            print(f"simulator: {args.vms} VMs x {args.disks_per_vm} disks ready in {time.monotonic() - t0:.1f} s")

            cfg = tmpdir / "vcenter.yml"
            cfg.write_text(
                "defaults:\n  username: bench\n  password_env: BENCH_VC_PASSWORD\n"
                "  insecure_skip_verify: true\n  max_query_metrics: 256\n"
                f"targets:\n  127.0.0.1:{sim_port}: {{}}\n"
            )
            our_port = free_port()
            ours = start(
                "vcenter-exporter",
                [
                    str(REPO / ".venv" / "bin" / "vcenter-exporter"),
                    "--web.listen-address",
                    f"127.0.0.1:{our_port}",
                    "--config.file",
                    str(cfg),
                ],
                tmpdir / "vcenter-exporter.log",
                env={"BENCH_VC_PASSWORD": password},
            )
            procs.append(ours)
            ours.wait_for_output(r"listening on", 30)
            our_url = f"http://127.0.0.1:{our_port}/probe"
            our_params = {"target": f"127.0.0.1:{sim_port}"}

            theirs = None
            if their_py is not None:
                their_port = free_port()
                theirs = start(
                    "vmware_exporter",
                    [str(their_py), "-c", SHIM, str(sim_port), str(their_port)],
                    tmpdir / "vmware_exporter.log",
                    env={
                        "VSPHERE_HOST": "127.0.0.1",
                        "VSPHERE_USER": "bench",
                        "VSPHERE_PASSWORD": password,
                        "VSPHERE_IGNORE_SSL": "True",
                    },
                )
                procs.append(theirs)
                theirs.wait_for_output(r"Starting web server", 60)
                their_url = f"http://127.0.0.1:{their_port}/metrics"

            # warm-up: login, inventory, counter look-up
            w = scrape(our_url, ours.pid, sim.pid, our_params)
            if not re.search(r"^vcenter_up 1(\.0)?$", w["text"], re.M):
                print("our exporter failed against the simulator:\n" + ours.output(2000), file=sys.stderr)
                return 1
            print(f"warm-up scrape: ours {w['wall']:.2f} s", end="")
            if theirs is not None:
                w = scrape(their_url, theirs.pid, sim.pid)
                print(f", vmware_exporter {w['wall']:.2f} s", end="")
            print()

            our_runs, their_runs, new_samples = [], [], []
            for _ in range(args.scrapes):
                time.sleep(args.pause)
                r = scrape(our_url, ours.pid, sim.pid, our_params)
                m = re.search(r"^vcenter_perf_new_samples (\S+)", r["text"], re.M)
                new_samples.append(float(m.group(1)) if m else 0.0)
                our_runs.append(r)
                if theirs is not None:
                    their_runs.append(scrape(their_url, theirs.pid, sim.pid))

            print(f"\n{args.scrapes} scrapes each, {args.vms} VMs x {args.disks_per_vm} disks, same simulator:")
            s_ours = summary("vcenter-exporter", our_runs)
            print(
                f"{'':<18} integrated {statistics.mean(new_samples):.0f} new 20 s disk samples per scrape "
                f"(x 15 virtualDisk counters)"
            )
            g = gate.Gate("bench/vcenter_scrape.py")
            growth = s_ours["rss_last"] - s_ours["rss5"]
            print(
                f"our RSS growth from scrape 5 to {args.scrapes}: {growth:+.1f} MB "
                f"(from scrape 1: {s_ours['rss_last'] - s_ours['rss1']:+.1f} MB)"
            )
            g.check(f"our RSS growth from scrape 5 to {args.scrapes}", growth, below=10, unit="MB")
            if theirs is None:
                return g.cannot_measure(f"vmware_exporter could not be run: {why_not}")
            s_theirs = summary("vmware_exporter", their_runs)
            print(
                f"simulator CPU per scrape (the floor): ours {s_ours['sim_cpu']:.3f} s, "
                f"vmware_exporter {s_theirs['sim_cpu']:.3f} s; vmware_exporter's RSS growth from scrape 5: "
                f"{s_theirs['rss_last'] - s_theirs['rss5']:+.1f} MB; peak RSS ratio vmware_exporter / ours "
                f"{s_theirs['hwm'] / s_ours['hwm']:.1f}x"
            )
            # Both exporters scraped in turn, under the same load: the ratios are the load-fair figures.
            g.check(
                "wall ratio vmware_exporter / ours (medians)",
                s_theirs["wall"].median / s_ours["wall"].median,
                at_least=4,
                unit="x",
            )
            cpu_ratio = s_theirs["cpu"].median / s_ours["cpu"].median if s_ours["cpu"].median > 0 else float("inf")
            g.check("CPU ratio vmware_exporter / ours (medians)", cpu_ratio, at_least=4, unit="x")
            return g.verdict()
        finally:
            for p in reversed(procs):
                p.stop(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
