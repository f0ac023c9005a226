#!/usr/bin/env python3
"""What the long-term store costs: samples/s written and disk per VM disk per day, VictoriaMetrics
against Prometheus' own TSDB in the same run.

One demo stack with ``long_term=True`` at the production intervals of deploy/prometheus/
prometheus.yml (5 s scrapes and rule evaluations, 20 s vCenter probes, fio scraped every 5 s)
and the shipped rules (alerts/). After a warm-up, for each measurement window:

- samples/s written: Prometheus' ``prometheus_remote_storage_samples_total`` (sent to
  VictoriaMetrics) and VictoriaMetrics' ``vm_rows_inserted_total{type="promremotewrite"}``
  (received), over the window;
- the share of them that scales with VM disks: the series of the jobs stargate, vcenter, fio and
  guest-node plus the recorded series, each at its own interval (from Prometheus:
  ``scrape_samples_scraped`` per job); the host's node_exporter and the exporters' own process
  metrics are per Prometheus, not per VM disk, and are left out of the per-disk figure;
- bytes on disk at the window's end: VictoriaMetrics' data directory after ``/internal/force_merge``
  and ``/internal/force_flush`` (every part written out and merged, as days of data end up), and
  Prometheus' TSDB as a block: a snapshot of the head (``/api/v1/admin/tsdb/snapshot``:
  compressed chunks and index, the form a 2 h block takes);
- bytes per sample, two ways: cumulative (everything on disk over every sample stored, the index
  of each series included) and marginal (the growth from the previous window over the samples
  added in it: what one more sample costs once the series exist, which is what a day of a PoC
  mostly is).

Printed per window and as min / median: samples/s (total and per VM disk) and bytes per sample;
the marginal bytes per sample over the whole run (per window it is noisy: VictoriaMetrics' merges
shrink what it wrote before), the ratio of the two stores, and disk per VM disk per day =
samples/s per VM disk x 86,400 x marginal bytes per sample. A run of minutes compresses short blocks (a few dozen samples per
series; a day gives 17,280 at 5 s), so the marginal figures are upper bounds too; the ratio of
the two stores is the robust number.

Targets (exit 1 when one is missed; both measured in the same run, so the machine's load does not
enter them): VictoriaMetrics received at least 99 % of the samples Prometheus sent (median over the
windows), and its marginal bytes per sample over the run below Prometheus' (ratio < 1: the reason
to keep months there).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

import gate

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ioparallax.simulators.stack import Stack  # noqa: E402

PER_DISK_JOBS = ("stargate", "vcenter", "fio", "guest-node")
DAY = 86_400


def metric(url: str, name: str, labels: str = "") -> float:
    """Sum of a metric's samples on an exposition page, optionally only those with ``labels``."""
    total = 0.0
    for line in requests.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name) and (line[len(name)] in " {") and labels in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def du(path: Path) -> int:
    """Bytes of the files under ``path``; a file a merge removes meanwhile counts 0 (the caller
    measures again until the size settles)."""
    total = 0
    for root, _, files in os.walk(path):  # os.walk skips a directory removed meanwhile
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


def query(stack: Stack, promql: str) -> list[dict]:
    return stack.query(promql)


def per_disk_samples_per_second(stack: Stack) -> tuple[float, int]:
    """Samples/s of the per-VM-disk jobs and the recorded series, and the number of VM disks."""
    intervals = {
        "stargate": stack.scrape_interval,
        "vcenter": stack.vcenter_scrape_interval,
        "fio": stack.fio_scrape_interval or stack.scrape_interval,
        "guest-node": stack.scrape_interval,
    }
    rate = 0.0
    for r in query(stack, f'sum by (job) (scrape_samples_scraped{{job=~"{"|".join(PER_DISK_JOBS)}"}})'):
        rate += float(r["value"][1]) / float(intervals[r["metric"]["job"]].rstrip("s"))
    recorded = query(stack, 'count({__name__=~".+:.+"}) + count(ALERTS) or count({__name__=~".+:.+"})')
    rate += float(recorded[0]["value"][1]) / float(stack.evaluation_interval.rstrip("s")) if recorded else 0.0
    disks = int(float(query(stack, "count(vcenter_virtual_disk_info)")[0]["value"][1]))
    return rate, disks


def prometheus_block_bytes(stack: Stack) -> int:
    """Size of a snapshot of the head (a block: what Prometheus keeps on disk), then removed."""
    r = requests.post(stack.urls["prometheus"] + "/api/v1/admin/tsdb/snapshot", timeout=60)
    r.raise_for_status()
    snap = stack.workdir / "prometheus-data" / "snapshots" / r.json()["data"]["name"]
    size = du(snap)
    shutil.rmtree(snap, ignore_errors=True)
    return size


def vm_bytes(stack: Stack) -> int:
    """Size of VictoriaMetrics' data directory with its parts merged and flushed."""
    vm = stack.urls["victoria-metrics"]
    requests.get(
        vm + "/internal/force_merge", params={"partition_prefix": time.strftime("%Y_%m", time.gmtime())}, timeout=120
    ).raise_for_status()
    requests.get(vm + "/internal/force_flush", timeout=60).raise_for_status()
    # force_merge returns before the merge ends: wait until the size settles.
    size, last = du(stack.workdir / "victoria-metrics-data"), -1
    while size != last:
        time.sleep(1)
        last, size = size, du(stack.workdir / "victoria-metrics-data")
    return size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="zero-heavy")
    parser.add_argument(
        "--warmup", type=float, default=60, help="seconds before the first window (default %(default)s)"
    )
    parser.add_argument("--window", type=float, default=60, help="seconds per window (default %(default)s)")
    parser.add_argument("--windows", type=int, default=4, help="measurement windows, at least 2 (default %(default)s)")
    args = parser.parse_args(argv)

    # SIGTERM unwinds like Ctrl-C, so the stack's processes are stopped by PID on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="ioparallax-long-term-bench-"))
    stack = Stack(
        scenario=args.scenario,
        workdir=workdir,
        fixed_ports=False,
        scrape_interval="5s",
        evaluation_interval="5s",
        vcenter_scrape_interval="20s",
        fio_scrape_interval=None,
        long_term=True,
        prometheus_flags=["--web.enable-admin-api"],
    )
    rows: list[dict[str, float]] = []
    g = gate.Gate("bench/long_term_store.py")
    g.calibrate()
    try:
        with stack:
            stack.wait_scraped(timeout=90)
            time.sleep(args.warmup)
            prom, vm = stack.urls["prometheus"], stack.urls["victoria-metrics"]
            sent0 = metric(prom, "prometheus_remote_storage_samples_total")
            recv0 = metric(vm, "vm_rows_inserted_total", 'type="promremotewrite"')
            t0 = time.monotonic()
            for i in range(args.windows):
                time.sleep(max(0.0, t0 + (i + 1) * args.window - time.monotonic()))
                sent = metric(prom, "prometheus_remote_storage_samples_total")
                recv = metric(vm, "vm_rows_inserted_total", 'type="promremotewrite"')
                elapsed = time.monotonic() - t0
                per_disk, disks = per_disk_samples_per_second(stack)
                appended = metric(prom, "prometheus_tsdb_head_samples_appended_total")
                vm_rows = metric(vm, "vm_rows_inserted_total", 'type="promremotewrite"')
                vm_b, prom_b = vm_bytes(stack), prometheus_block_bytes(stack)
                row = {
                    "sent_per_s": (sent - sent0) / elapsed,
                    "received_per_s": (recv - recv0) / elapsed,
                    "per_disk_per_s": per_disk / disks,
                    "disks": disks,
                    "vm_bytes_per_sample": vm_b / vm_rows,
                    "prom_bytes_per_sample": prom_b / appended,
                    "vm_bytes": vm_b,
                    "prom_bytes": prom_b,
                    "vm_rows": vm_rows,
                    "appended": appended,
                    "load": gate.load(),
                }
                if rows:
                    prev = rows[-1]
                    row["vm_marginal"] = (vm_b - prev["vm_bytes"]) / (vm_rows - prev["vm_rows"])
                    row["prom_marginal"] = (prom_b - prev["prom_bytes"]) / (appended - prev["appended"])
                rows.append(row)
                print(
                    f"window {i + 1}: sent {row['sent_per_s']:.0f} samples/s, received {row['received_per_s']:.0f}/s; "
                    f"per VM disk {row['per_disk_per_s']:.0f}/s ({disks} VM disks); "
                    f"VictoriaMetrics {vm_b:,} B / {vm_rows:,.0f} rows = {row['vm_bytes_per_sample']:.2f} B/sample, "
                    f"Prometheus block {prom_b:,} B / {appended:,.0f} samples = {row['prom_bytes_per_sample']:.2f} B/sample"
                    + (
                        f"; marginal {row['vm_marginal']:.2f} and {row['prom_marginal']:.2f} B/sample"
                        if "vm_marginal" in row
                        else ""
                    ),
                    flush=True,
                )
    except Exception as exc:  # a stack that did not start (a tool missing) or died: not measured
        return g.cannot_measure(f"the demo stack failed: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def summary(key: str) -> str:
        values = [r[key] for r in rows if key in r]
        return f"min {min(values):.2f} / median {statistics.median(values):.2f}"

    marginal = [r for r in rows if "vm_marginal" in r]
    if not marginal:
        return g.cannot_measure("need at least 2 windows for the marginal bytes per sample")

    print()
    print(
        f"scenario {args.scenario}, intervals of deploy/prometheus/prometheus.yml, {len(rows)} windows of "
        f"{args.window:.0f} s after {args.warmup:.0f} s, load average {min(r['load'] for r in rows):.1f}-"
        f"{max(r['load'] for r in rows):.1f} on {gate.CORES} cores"
    )
    print(f"samples/s written (remote_write sent):      {summary('sent_per_s')}")
    print(f"samples/s per VM disk (raw + recorded):     {summary('per_disk_per_s')}")
    print(f"VictoriaMetrics bytes/sample, cumulative:   {summary('vm_bytes_per_sample')}")
    print(f"Prometheus (block) bytes/sample, cumulative:{summary('prom_bytes_per_sample')}")
    # The marginal cost over the whole run (first window's end to the last's): VictoriaMetrics'
    # merges shrink what it wrote before, so one window's growth alone can even be negative.
    first, last = rows[0], rows[-1]
    vm_marginal = (last["vm_bytes"] - first["vm_bytes"]) / (last["vm_rows"] - first["vm_rows"])
    prom_marginal = (last["prom_bytes"] - first["prom_bytes"]) / (last["appended"] - first["appended"])
    print(
        f"VictoriaMetrics bytes/sample, marginal:     {vm_marginal:.2f} over the run "
        f"(per window: {summary('vm_marginal')})"
    )
    print(
        f"Prometheus (block) bytes/sample, marginal:  {prom_marginal:.2f} over the run "
        f"(per window: {summary('prom_marginal')})"
    )
    ratios = [r["vm_bytes_per_sample"] / r["prom_bytes_per_sample"] for r in rows]
    print(
        f"ratio VictoriaMetrics / Prometheus, cumulative: min {min(ratios):.2f} / median {statistics.median(ratios):.2f}"
    )
    print(f"ratio VictoriaMetrics / Prometheus, marginal:   {vm_marginal / prom_marginal:.2f}")
    per_disk = statistics.median(r["per_disk_per_s"] for r in rows)
    print(
        f"disk per VM disk per day, VictoriaMetrics:  {per_disk * DAY * vm_marginal / 1e6:.1f} MB "
        f"({per_disk:.0f} samples/s x 86,400 s x {vm_marginal:.2f} B)"
    )
    print(
        f"disk per VM disk per day, Prometheus:       {per_disk * DAY * prom_marginal / 1e6:.1f} MB "
        f"({per_disk:.0f} samples/s x 86,400 s x {prom_marginal:.2f} B)"
    )
    loads = [r["load"] for r in rows]
    g.check(
        "received / sent samples per second",
        gate.Runs([r["received_per_s"] / r["sent_per_s"] for r in rows], loads),
        at_least=0.99,
        fmt=".3f",
    )
    g.check("VictoriaMetrics / Prometheus marginal bytes per sample", vm_marginal / prom_marginal, below=1, fmt=".2f")
    return g.verdict()


if __name__ == "__main__":
    sys.exit(main())
