"""Benchmark: one stargate-exporter probe of a CVM hosting 1,000 vdisks.

The simulator runs as a separate process (its CPU is not the exporter's). In this process, side by
side: the exporter's probe (concurrent detail fetches over one keep-alive session, lxml) and a
naive baseline (sequential fetches, a new connection each, BeautifulSoup with html.parser).
Prints wall time, CPU and peak RSS, and the ratios. Targets: < 2 s wall, < 150 MB RSS, >= 5x.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from bs4 import BeautifulSoup

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from exporters.stargate.collector import HttpClient, StargateCollector, probe  # noqa: E402
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

VDISKS = 1000
RUNS = 3


def start_simulator(tmp: Path) -> tuple[subprocess.Popen, str]:
    urls = tmp / "urls.json"
    proc = subprocess.Popen([str(Path(sys.executable).parent / "stargate-simulator"), "clean-oltp",
                             "--synthetic-vdisks", str(VDISKS), "--urls-file", str(urls)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (urls.exists() and urls.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the Stargate simulator did not start")
        time.sleep(0.1)
    return proc, next(iter(json.loads(urls.read_text()).values()))


def exporter_probe(session: requests.Session, url: str) -> int:
    result = probe(session, url, time.monotonic() + 30, concurrency=16)
    reg = CollectorRegistry()
    reg.register(StargateCollector(result))
    text = generate_latest(reg)
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


def measure(fn, *args) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(RUNS):
        w0, c0 = time.perf_counter(), time.process_time()
        fn(*args)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        sim, url = start_simulator(Path(tmp))
        try:
            session = HttpClient()
            exporter_probe(session, url)          # warm-up: simulator renders its pages once per second
            ours_wall, ours_cpu = measure(exporter_probe, session, url)
            ours_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            base_wall, base_cpu = measure(baseline_probe, url)
        finally:
            sim.terminate()
            sim.wait(10)
    print(f"stargate probe of one CVM with {VDISKS} vdisks (main page + {VDISKS} detail pages), best of {RUNS}")
    print(f"  exporter  wall {ours_wall:6.2f} s  cpu {ours_cpu:6.2f} s  peak RSS {ours_rss:6.1f} MB (measured before the baseline ran)")
    print(f"  baseline  wall {base_wall:6.2f} s  cpu {base_cpu:6.2f} s  (sequential, new connection per page, html.parser)")
    print(f"  ratio     wall {base_wall / ours_wall:5.1f}x  cpu {base_cpu / ours_cpu:5.1f}x")
    ok = ours_wall < 2.0 and ours_rss < 150 and base_wall / ours_wall >= 5
    print(f"  targets (< 2 s wall, < 150 MB RSS, >= 5x wall): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
