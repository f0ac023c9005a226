"""The 2 s VM view of an ESXi cluster: the esxtop simulator and the esxtop exporter following it.

On a real PoC the engineer runs ``esxtop -b -d 2`` on each ESXi host over SSH into a directory of
the collector host, and one esxtop exporter follows the growing files (docs/esxtop.md). Here the
esxtop simulator writes those files, one ``<host>.csv`` per ESXi host of the scenario and its
vscsiStats output, from the same per-second truth vCenter's 20 s samples average; the exporter
labels every virtual disk ``vm`` and ``disk`` as the vCenter exporter does, so the two VM views join.
"""

from __future__ import annotations

from typing import Any

from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.config import BIN
from ioparallax.simulators.stack.launch import Launcher, start_exporter, wait_started

# esxtop's delay in the demo (its minimum, what docs/esxtop.md recommends) and the job's scrape
# interval: as often as esxtop writes, so every sample's gauges (esxtop_*_sample_*) are seen once and
# max_over_time() of them finds a burst's 2 s sample (the counters are exact at any interval).
DELAY_SECONDS = 2
SCRAPE_INTERVAL = f"{DELAY_SECONDS}s"


def start_esxtop(stack: Launcher, part: ClusterPart) -> list[dict[str, Any]]:
    """The esxtop simulator writing each ESXi host's capture into ``<workdir>/esxtop``, and one esxtop
    exporter watching that directory, scraped as job "esxtop" every ``SCRAPE_INTERVAL``. Nothing for
    an AHV cluster (no esxtop there) or a scenario without VMs."""
    if part.ahv or not part.trace.scenario.vms:
        return []
    out = part.workdir / "esxtop"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.csv"):  # a previous run's captures: this run's start afresh
        old.unlink()
    hosts = sorted({vm.host for vm in part.trace.scenario.vms})
    sim = stack.spawn(
        part.proc("esxtop-simulator"),
        [BIN / "esxtop-simulator", part.scenario, "--out", out, "--delay", str(DELAY_SECONDS), "--vscsi-every", "30"],
    )
    # the headers, written at start
    wait_started(sim, lambda: all((out / f"{h}.csv").exists() for h in hosts), "esxtop simulator")
    exp = start_exporter(
        stack,
        part,
        "esxtop-exporter",
        [f"--esxtop.watch={out}", f"--esxtop.scrape-interval={SCRAPE_INTERVAL}"],
        subcommand=["serve"],
    )
    return [
        {
            "job_name": "esxtop",
            "scrape_interval": SCRAPE_INTERVAL,
            "scrape_timeout": SCRAPE_INTERVAL,
            "static_configs": [
                {"targets": [exp.url.split("://", 1)[1]], "labels": part.labels(stack.resolved_cluster_label())}
            ],
        }
    ]
