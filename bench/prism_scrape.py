#!/usr/bin/env python3
"""Probe cost of prism-exporter against a straightforward poller of the same Prism v2 endpoint.

One Prism simulator (``prism-simulator --synthetic-vdisks 2000``: 2,000 single-disk VMs, basic
auth, real clock) serves both, in the same run:

- **ours**: ``prism-exporter`` probing it (``/probe?target=``): the paged ``virtual_disks`` call
  (500 per page), every new 30 s sample dated and integrated into the VM-view and storage-view
  counters, identity series, the latest sample (24 series per disk);
- **peer**: what one writes first (written here, below, as ``PEER``): ``requests`` + ``json`` +
  ``prometheus_client``; on each scrape one GET of all of ``virtual_disks`` (no paging) and a
  gauge per disk for each of 12 rate and latency stats (``hypervisor_*`` and ``controller_*``),
  through a custom collector served by ``prometheus_client.start_http_server`` (gzip when asked,
  as Prometheus asks and as ours does). It integrates nothing (a scrape every 2 min
  shows one 30 s sample in four) and it sends the password on every request.

Like for like: ours runs with ``cpu: false``, reading what the peer reads (the disks). Its default,
``cpu: true``, also reads the VM and host lists at every probe for the CPU of VMs, CVMs and hosts
(docs/prism.md): two more list calls the simulator serves one after another, +0.13 s wall a probe
here (0.46 -> 0.59 s median at 2,000 disks, load 0.6), which made the wall ratio 0.92x; ``--cpu``
measures that configuration.

Printed: for each, wall time (client side) and CPU (the process' utime + stime) per scrape, min
and median of ``--runs`` scrapes taken alternately after one warm-up, peak RSS, series per
scrape; cold start (process started to the first scrape with data, wall and CPU); the ratios
ours / peer, each with the load average it ran at. Target: ours at most the peer's median CPU and
median wall per scrape (ratio peer / ours >= 1.0, both scraped in turn under the same load) while
it exposes twice the series per disk; exit 1 on a miss, after every figure (bench/gate.py).

Run it with ``nice -n 10 .venv/bin/python bench/prism_scrape.py`` (a shared machine).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
import tempfile
import time
from pathlib import Path

import requests

import gate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ioparallax.simulators.process import Process, free_port, start  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

PEER = """
import json, os, sys

import requests
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily

URL = sys.argv[1] + "/PrismGateway/services/rest/v2.0/virtual_disks/"
AUTH = (os.environ["PEER_USER"], os.environ["PEER_PASSWORD"])
STATS = [
    f"{view}_{name}"
    for view in ("hypervisor", "controller")
    for name in (
        "num_read_iops", "num_write_iops", "read_io_bandwidth_kBps", "write_io_bandwidth_kBps",
        "avg_read_io_latency_usecs", "avg_write_io_latency_usecs",
    )
]


class Collector:
    def collect(self):
        doc = json.loads(requests.get(URL, auth=AUTH, timeout=60).content)
        families = {k: GaugeMetricFamily("nutanix_vdisk_" + k, k, labels=["vm", "disk", "vm_id"]) for k in STATS}
        for e in doc["entities"]:
            labels = [e.get("attached_vmname") or "", e.get("disk_address") or "", e.get("attached_vm_uuid") or ""]
            stats = e.get("stats") or {}
            for k in STATS:
                v = stats.get(k)
                if v is not None and v != "-1":
                    families[k].add_metric(labels, float(v))
        yield from families.values()


registry = CollectorRegistry()
registry.register(Collector())


server, thread = start_http_server(int(sys.argv[2]), addr="127.0.0.1", registry=registry)
print("listening", flush=True)
thread.join()
"""


def peak_rss_mb(pid: int) -> float:
    m = re.search(r"VmHWM:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())
    return int(m.group(1)) / 1024 if m else float("nan")


def scrape(url: str, params: dict | None, pid: int) -> tuple[float, float, str]:
    cpu0 = gate.cpu_seconds(pid)
    t0 = time.perf_counter()
    r = requests.get(url, params=params, headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"}, timeout=120)
    wall = time.perf_counter() - t0
    r.raise_for_status()
    return wall, gate.cpu_seconds(pid) - cpu0, r.text


def has_data(text: str) -> bool:
    return (
        "prism_up 0" not in text
        and re.search(r"^(prism_virtual_disk_read_ops_total|nutanix_vdisk_)", text, re.M) is not None
    )


def cold_start(proc: Process, url: str, params: dict | None, t_start: float) -> tuple[float, float]:
    """Seconds from the process' start to the first scrape with data, and its CPU by then."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            r = requests.get(url, params=params, headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"}, timeout=120)
            if r.status_code == 200 and has_data(r.text):
                return time.monotonic() - t_start, gate.cpu_seconds(proc.popen.pid)
        except requests.ConnectionError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{proc.name} gave no data within 120 s (log: {proc.log_path})")


def series(text: str) -> int:
    return sum(1 for ln in text.splitlines() if ln and ln[0] != "#")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--disks", type=int, default=2000, help="virtual disks (one per VM) (default %(default)s)")
    ap.add_argument("--runs", type=int, default=10, help="scrapes of each, after one warm-up (default %(default)s)")
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="ours with cpu: true (its default: the VM and host lists at every read, data the peer does not read)",
    )
    args = ap.parse_args()
    g = gate.Gate("bench/prism_scrape.py")
    g.calibrate()
    password = secrets.token_urlsafe(12)
    procs: list[Process] = []
    with tempfile.TemporaryDirectory(prefix="prism-bench-") as tmp:
        tmpdir = Path(tmp)
        env = {**os.environ, "BENCH_PRISM_PASSWORD": password}
        try:
            sim_port = free_port()
            sim = start(
                "prism-simulator",
                [
                    BIN / "prism-simulator",
                    f"--synthetic-vdisks={args.disks}",
                    f"--listen=127.0.0.1:{sim_port}",
                    "--username=bench",
                    "--password-env=BENCH_PRISM_PASSWORD",
                ],
                tmpdir / "sim.log",
                env=env,
            )
            procs.append(sim)
            sim.wait_for_output(r"^prism http://", 120)
            target = f"127.0.0.1:{sim_port}"

            cfg = tmpdir / "prism.yml"
            cfg.write_text(
                "defaults:\n  username: bench\n  password_env: BENCH_PRISM_PASSWORD\n  scheme: http\n"
                f"  cpu: {'true' if args.cpu else 'false'}\n"
                f"targets:\n  {target}: {{}}\n"
            )
            our_port = free_port()
            t0 = time.monotonic()
            ours = start(
                "prism-exporter",
                [BIN / "prism-exporter", f"--web.listen-address=127.0.0.1:{our_port}", f"--config.file={cfg}"],
                tmpdir / "ours.log",
                env=env,
            )
            procs.append(ours)
            our_url, our_params = f"http://127.0.0.1:{our_port}/probe", {"target": target}
            our_cold = cold_start(ours, our_url, our_params, t0)

            peer_py = tmpdir / "peer.py"
            peer_py.write_text(PEER)
            peer_port = free_port()
            t0 = time.monotonic()
            peer = start(
                "peer-poller",
                [sys.executable, peer_py, f"http://{target}", str(peer_port)],
                tmpdir / "peer.log",
                env={**env, "PEER_USER": "bench", "PEER_PASSWORD": password},
            )
            procs.append(peer)
            peer_url = f"http://127.0.0.1:{peer_port}/metrics"
            peer_cold = cold_start(peer, peer_url, None, t0)

            scrape(our_url, our_params, ours.popen.pid)  # warm-up
            scrape(peer_url, None, peer.popen.pid)
            mine: list[tuple[float, float, float]] = []
            theirs: list[tuple[float, float, float]] = []
            our_text = peer_text = ""
            for _ in range(args.runs):
                w, c, our_text = scrape(our_url, our_params, ours.popen.pid)
                mine.append((w, c, gate.load()))
                w, c, peer_text = scrape(peer_url, None, peer.popen.pid)
                theirs.append((w, c, gate.load()))
            rss = {"ours": peak_rss_mb(ours.popen.pid), "peer": peak_rss_mb(peer.popen.pid)}
            if "prism_up 1" not in our_text:
                return g.cannot_measure(f"ours is not up: {our_text[:500]}")
        finally:
            for p in reversed(procs):
                p.stop()

        def row(
            name: str, runs: list[tuple[float, float, float]], cold: tuple[float, float], text: str, pid_rss: float
        ) -> dict:
            loads = [r[2] for r in runs]
            s = {
                "wall": gate.Runs([r[0] for r in runs], loads),
                "cpu": gate.Runs([r[1] for r in runs], loads),
                "series": series(text),
            }
            print(
                f"{name:<6} wall {s['wall'].describe('s')}\n       cpu {s['cpu'].describe('s')}\n"
                f"       series {s['series']}   cold start {cold[0]:.2f} s ({cold[1]:.2f} s CPU)   "
                f"peak RSS {pid_rss:.0f} MB"
            )
            return s

    print(
        f"{args.disks} virtual disks, {args.runs} scrapes each after one warm-up (alternating); "
        f"ours with cpu: {str(args.cpu).lower()}"
    )
    a = row("ours", mine, our_cold, our_text, rss["ours"])
    b = row("peer", theirs, peer_cold, peer_text, rss["peer"])
    print(f"series per disk {a['series'] / args.disks:.1f} (ours) vs {b['series'] / args.disks:.1f} (peer)")
    for kind, label in (("cpu", "CPU"), ("wall", "wall")):
        g.check_ratio(f"{label} per scrape, peer / ours (medians)", b[kind], a[kind], at_least=1.0)
    g.require(
        "ours exposes at least twice the peer's series per disk",
        a["series"] >= 2 * b["series"] > 0,
        f"{a['series'] / args.disks:.1f} and {b['series'] / args.disks:.1f} per disk",
    )
    return g.verdict()


if __name__ == "__main__":
    sys.exit(main())
