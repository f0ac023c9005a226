"""Benchmark: one stargate-exporter probe of a CVM hosting 1,000 vdisks.

The simulator runs as a separate process on the same 2 cores (its CPU is not the exporter's, but
it competes for them, so its CPU per probe is printed too). By default its clock is frozen, so
it renders each page once and then serves it from its cache, as a real CVM's C++ Stargate serves
its pages cheaply; ``--live-clock`` lets it re-render every page each clock second (the
simulator's own Python rendering then takes ~0.7 s of CPU per probe from the same 2 cores).

In this process, side by side: the exporter's probe (concurrent detail fetches over keep-alive
connections, the detail views read by the strict reader, as the exporter's default does in its
one process: no parse workers since issue 24, the allocator set up as the exporter sets it), the
baseline a competent user writes (issue 34: one ``requests.Session`` shared by 8 threads, so its
connections are pooled and kept alive, and lxml.html, every table cell's text extracted) and,
for the record, a naive one (sequential fetches, a new connection each, BeautifulSoup with
html.parser; against it the margin read 8x larger in CPU and 30x in wall time, 2026-11-28). Prints the calibration (bench/gate.py), wall
time, CPU and peak RSS, and the ratios, each as min / median over the runs with the load average
they ran at. Targets (exit 1 when one is missed), against the competent baseline run in the same
process under the same load: median wall ratio baseline / exporter >= 5x and median CPU ratio
>= 5x; the exporter's CPU per page under 0.016 calibration units (pure-Python kernel; measured
0.008 at load 11); peak RSS < 150 MB (the exporter's default runs in one process, so this is every process of it;
bench/stargate_cluster.py checks the same target on a real exporter process); every detail view
read by the strict reader (none by its lxml fallback); and last, wall time: median < 1 s
(issue 24), with the load it ran at.

    .venv/bin/python bench/stargate_scrape.py [--live-clock] [--concurrency N] [--baseline-runs N]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lxml.html
import requests
from bs4 import BeautifulSoup

import gate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from ioparallax.exporters.common.memory import tune_malloc  # noqa: E402
from ioparallax.exporters.stargate.client import DEFAULT_BODY_SIZE_LIMIT, HttpClient  # noqa: E402
from ioparallax.exporters.stargate.collector import StargateCollector  # noqa: E402
from ioparallax.exporters.stargate.target import DEFAULT_CONCURRENCY, DETAIL_READS, probe  # noqa: E402
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


class CompetentScraper:
    """What a competent user writes in an afternoon: one ``requests.Session`` (pooled keep-alive
    connections) shared by ``threads`` threads, lxml.html, every table cell's text of every vdisk
    page (the exporter does more: numbers, units, series)."""

    def __init__(self, threads: int = 8) -> None:
        self.session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=threads)
        self.session.mount("http://", adapter)
        self.pool = ThreadPoolExecutor(threads)

    def _page(self, url: str) -> list[list[list[str]]]:
        doc = lxml.html.fromstring(self.session.get(url, timeout=30).content)
        return [[[c.text_content().strip() for c in tr] for tr in t.iter("tr")] for t in doc.iter("table")]

    def probe(self, url: str) -> int:
        main = lxml.html.fromstring(self.session.get(url + "/", timeout=30).content)
        links = [h for h in main.xpath("//a/@href") if "vdisk" in h]
        assert len(links) == VDISKS, len(links)
        pages = list(self.pool.map(self._page, [requests.compat.urljoin(url + "/", h) for h in links]))
        cells = sum(len(row) for tables in pages for t in tables for row in t)
        assert all(pages) and cells > VDISKS, cells
        return cells

    def close(self) -> None:
        self.pool.shutdown()
        self.session.close()


def measure(runs: int, sim_pid: int, fn, *args) -> tuple[gate.Runs, gate.Runs, gate.Runs]:
    """Wall and CPU of this process, and the simulator's CPU, in each of ``runs`` runs."""
    wall, cpu, sim = gate.Runs(), gate.Runs(), gate.Runs()
    for _ in range(runs):
        w0, c0, s0 = time.perf_counter(), time.process_time(), gate.cpu_seconds(sim_pid)
        fn(*args)
        wall.add(time.perf_counter() - w0)
        cpu.add(time.process_time() - c0)
        sim.add(gate.cpu_seconds(sim_pid) - s0)
    return wall, cpu, sim


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
    ap.add_argument("--runs", type=int, default=RUNS, help="runs of the exporter's probe (default: %(default)s)")
    ap.add_argument("--baseline-runs", type=int, default=1, help="runs of the slow baseline (default: %(default)s)")
    args = ap.parse_args(argv)
    tune_malloc()  # as the exporter does at start-up
    g = gate.Gate("bench/stargate_scrape.py")
    g.calibrate()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            sim, url = start_simulator(Path(tmp), args.live_clock)
        except SystemExit as exc:
            return g.cannot_measure(str(exc))
        try:
            client = HttpClient()
            exporter_probe(client, url, args.concurrency)  # warm-up (fills the simulator's page cache)
            main_page_bytes = len(requests.get(url + "/", timeout=30).content)
            ours_wall, ours_cpu, ours_sim = measure(args.runs, sim.pid, exporter_probe, client, url, args.concurrency)
            ours_rss = gate.of([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024])
            competent = CompetentScraper(8)
            try:
                competent.probe(url)  # warm-up, as the exporter had
                comp_wall, comp_cpu, comp_sim = measure(args.runs, sim.pid, competent.probe, url)
            finally:
                competent.close()
            base_wall, base_cpu, base_sim = measure(args.baseline_runs, sim.pid, baseline_probe, url)
        finally:
            sim.stop(timeout=10)
    clock = (
        "live clock: pages re-rendered each second" if args.live_clock else "frozen clock: pages served from its cache"
    )
    print(
        f"stargate probe of one CVM with {VDISKS} vdisks (main page + {VDISKS} detail pages), "
        f"{gate.CORES} cores, simulator with {clock}"
    )
    print(f"  exporter (concurrency {args.concurrency}): wall {ours_wall.describe('s')}, cpu {ours_cpu.describe('s')}")
    print(f"  simulator cpu in those probes {ours_sim.describe('s')}")
    print(
        f"  competent baseline (one requests.Session, 8 threads, lxml.html): wall {comp_wall.describe('s')}, "
        f"cpu {comp_cpu.describe('s')}, simulator cpu {comp_sim.describe('s')}"
    )
    print(
        f"  naive baseline (sequential, new connection per page, html.parser): wall {base_wall.describe('s')}, "
        f"cpu {base_cpu.describe('s')}, simulator cpu {base_sim.describe('s')}"
    )
    print(
        f"  main page {main_page_bytes / 1000:.0f} kB: the default body_size_limit "
        f"({DEFAULT_BODY_SIZE_LIMIT / 2**20:g} MiB) is {DEFAULT_BODY_SIZE_LIMIT / main_page_bytes:.1f}x it"
    )
    # The baselines ran in the same process, under the same load: the ratios are the load-fair figures.
    g.check_ratio("wall ratio competent baseline / exporter (medians)", comp_wall, ours_wall, at_least=5, fmt="")
    g.check_ratio("CPU ratio competent baseline / exporter (medians)", comp_cpu, ours_cpu, at_least=5, fmt="")
    print(
        f"  naive baseline / exporter (medians, no target): wall {base_wall.median / ours_wall.median:.1f}x, "
        f"cpu {base_cpu.median / ours_cpu.median:.1f}x"
    )
    g.check_cpu("exporter probe", ours_cpu, below=0.016, per=VDISKS + 1, per_what="page")
    g.check(
        "exporter peak RSS (this process, measured before the baselines ran)",
        ours_rss,
        below=150,
        unit="MB",
        stat="max",
    )
    g.require(
        "every detail view read by the strict reader",
        DETAIL_READS.strict > 0 and DETAIL_READS.lxml == 0,
        f"{DETAIL_READS.strict:,} strict, {DETAIL_READS.lxml:,} lxml (fallback)",
    )
    g.check("exporter probe wall (last: depends on the machine and its load)", ours_wall, below=1.0, unit="s")
    return g.verdict()


if __name__ == "__main__":
    sys.exit(main())
