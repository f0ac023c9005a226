"""Benchmark: one stargate-exporter probe of a CVM hosting 1,000 vdisks.

The simulator runs as a separate process on the same 2 cores (its CPU is not the exporter's, but
it competes for them, so its CPU per probe is printed too). By default its clock is frozen, so
it renders each page once and then serves it from its cache, as a real CVM's C++ Stargate serves
its pages cheaply; ``--live-clock`` lets it re-render every page each clock second (the
simulator's own Python rendering then takes ~0.7 s of CPU per probe from the same 2 cores).

In this process, side by side: the exporter's probe (concurrent detail fetches over keep-alive
connections, lxml) and a naive baseline (sequential fetches, a new connection each,
BeautifulSoup with html.parser). Prints wall time, CPU and peak RSS, and the ratios.
Targets: < 2 s wall, < 150 MB RSS, >= 5x.

    .venv/bin/python bench/stargate_scrape.py [--live-clock] [--concurrency N] [--baseline-runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import requests
from bs4 import BeautifulSoup

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from ioparallax.exporters.stargate.exposition import StargateCollector  # noqa: E402
from ioparallax.exporters.stargate.probe import DEFAULT_CONCURRENCY, probe  # noqa: E402
from ioparallax.exporters.stargate.transport import DEFAULT_BODY_SIZE_LIMIT, HttpClient  # noqa: E402
from ioparallax.simulators.process import Process, start  # noqa: E402

VDISKS = 1000
RUNS = 3


def start_simulator(tmp: Path, live_clock: bool) -> tuple[Process, str]:
    urls = tmp / "urls.json"
    cmd = [
        str(Path(sys.executable).parent / "stargate-simulator"),
        "clean-oltp",
        "--synthetic-vdisks",
        str(VDISKS),
        "--urls-file",
        str(urls),
    ]
    if not live_clock:
        cmd += ["--freeze-at", str(time.time())]
    proc = start("stargate-simulator", cmd, tmp / "stargate-simulator.log")
    deadline = time.monotonic() + 60
    while not (urls.exists() and urls.read_text().strip()):
        if not proc.alive() or time.monotonic() > deadline:
            proc.stop()
            raise SystemExit(f"the Stargate simulator did not start:\n{proc.output()}")
        time.sleep(0.1)
    return proc, next(iter(json.loads(urls.read_text()).values()))


def cpu_seconds(pid: int) -> float:
    """User + system CPU of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def exporter_probe(client: HttpClient, url: str, concurrency: int) -> int:
    result = probe(client, url, time.monotonic() + 30, concurrency=concurrency)
    text = StargateCollector(result).render()  # the body the exporter answers /probe with
    assert result.up and len(result.details) == VDISKS and not result.detail_errors, result.detail_errors
    return len(text)


def baseline_probe(url: str) -> int:
    main = BeautifulSoup(requests.get(url + "/", timeout=30).text, "html.parser")
    links = [a["href"] for a in main.find_all("a", href=True) if "vdisk" in a["href"]]
    tables = 0
    for href in links:
        soup = BeautifulSoup(requests.get(requests.compat.urljoin(url + "/", href), timeout=30).text, "html.parser")
        tables += len(soup.find_all("table"))
    assert len(links) == VDISKS
    return tables


def measure(runs: int, sim_pid: int, fn, *args) -> tuple[float, float, float]:
    """Best-of-``runs`` wall and CPU of this process, and the simulator's CPU in that same run."""
    best = (float("inf"), 0.0, 0.0)
    for _ in range(runs):
        w0, c0, s0 = time.perf_counter(), time.process_time(), cpu_seconds(sim_pid)
        fn(*args)
        wall, cpu, sim = time.perf_counter() - w0, time.process_time() - c0, cpu_seconds(sim_pid) - s0
        best = min(best, (wall, cpu, sim))
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--live-clock", action="store_true", help="let the simulator re-render its pages every clock second"
    )
    ap.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="the exporter's --stargate.concurrency (default: %(default)s, the exporter's default)",
    )
    ap.add_argument("--baseline-runs", type=int, default=1, help="runs of the slow baseline (default: %(default)s)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        sim, url = start_simulator(Path(tmp), args.live_clock)
        try:
            client = HttpClient()
            exporter_probe(client, url, args.concurrency)  # warm-up (fills the simulator's page cache)
            main_page_bytes = len(requests.get(url + "/", timeout=30).content)
            ours_wall, ours_cpu, ours_sim = measure(RUNS, sim.pid, exporter_probe, client, url, args.concurrency)
            ours_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            base_wall, base_cpu, base_sim = measure(args.baseline_runs, sim.pid, baseline_probe, url)
        finally:
            sim.stop(timeout=10)
    clock = (
        "live clock: pages re-rendered each second" if args.live_clock else "frozen clock: pages served from its cache"
    )
    print(
        f"stargate probe of one CVM with {VDISKS} vdisks (main page + {VDISKS} detail pages), "
        f"{os.cpu_count()} cores, simulator with {clock}"
    )
    print(
        f"  exporter  wall {ours_wall:6.2f} s  cpu {ours_cpu:6.2f} s  peak RSS {ours_rss:6.1f} MB  "
        f"(best of {RUNS}, concurrency {args.concurrency}; RSS measured before the baseline ran)"
    )
    print(f"            simulator cpu in that probe {ours_sim:5.2f} s")
    print(
        f"  baseline  wall {base_wall:6.2f} s  cpu {base_cpu:6.2f} s  (best of {args.baseline_runs}: sequential, "
        f"new connection per page, html.parser; simulator cpu {base_sim:5.2f} s)"
    )
    print(f"  ratio     wall {base_wall / ours_wall:5.1f}x  cpu {base_cpu / ours_cpu:5.1f}x")
    print(
        f"  main page {main_page_bytes / 1000:.0f} kB: the default body_size_limit "
        f"({DEFAULT_BODY_SIZE_LIMIT / 2**20:g} MiB) is {DEFAULT_BODY_SIZE_LIMIT / main_page_bytes:.1f}x it"
    )
    ok = ours_wall < 2.0 and ours_rss < 150 and base_wall / ours_wall >= 5
    print(f"  targets (< 2 s wall, < 150 MB RSS, >= 5x wall): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
