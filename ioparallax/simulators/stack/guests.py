"""The guest view of a cluster: the guest simulator and, per VM, the exporters a real guest would run."""

from __future__ import annotations

from typing import Any

from ioparallax.simulators.process import free_port
from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.config import BIN, pick_port
from ioparallax.simulators.stack.launch import Launcher, start_announcing


def start_guests(stack: Launcher, part: ClusterPart) -> list[dict[str, Any]]:
    """The guest view: the guest simulator writes, per VM, the fio json+ status stream, the
    sysfs disk facts and the kernel's /proc/diskstats a real guest would show; one fio exporter
    per VM reads the first two unchanged (as one would run inside each guest), scraped as job
    "fio", and one real node_exporter per VM (diskstats collector only) reads the guest's
    procfs, sysfs and udev database, scraped as job "guest-node"; both with the target label
    ``vm``. The host's own node_exporter stays job "node". A VM whose scenario has an application
    gets a pgbench exporter too, following the pgbench output the guest simulator writes, scraped
    as job "pgbench" with the same ``vm`` label (the application view)."""
    guests = part.workdir / "guests"
    manifest = part.workdir / "guests.json"
    argv = ["ioparallax-guest-simulator", "--dir", guests, "--manifest", manifest]
    paths: dict[str, dict[str, str]] = start_announcing(stack, part, "guest-simulator", argv, manifest)
    cache = part.trace.scenario.cluster.dram_cache_bytes
    label = stack.resolved_cluster_label()
    static: list[dict[str, Any]] = []
    node_static: list[dict[str, Any]] = []
    windows_static: list[dict[str, Any]] = []
    procs = []
    taken: set[int] = set()

    def port_for(name: str, preferred: bool = False) -> int:
        # exporters not yet listening: do not hand out a port twice
        port = pick_port(name, stack.fixed_ports and preferred)
        while port in taken:
            port = free_port()
        taken.add(port)
        return port

    def serve(proc_name: str, port: int, argv: list[Any], targets: list[dict[str, Any]], **labels: str) -> None:
        # an exporter on port, listed in targets with the cluster's labels and these
        procs.append(stack.spawn(part.proc(proc_name), argv, url=f"http://127.0.0.1:{port}"))
        targets.append({"targets": [f"127.0.0.1:{port}"], "labels": part.labels(label, **labels)})

    pgbench_static: list[dict[str, Any]] = []
    first_fio = first_pgbench = True
    for vm, where in paths.items():
        if "windows" in where:
            # The Windows guest OS view: windows_exporter's metrics, written by the guest
            # simulator as a textfile and served by node_exporter's textfile collector (no
            # windows_exporter runs on Linux; the names, labels and types are its).
            port = port_for("guest-windows")
            serve(
                f"guest-windows-exporter-{vm}",
                port,
                [
                    "prometheus-node-exporter",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--collector.disable-defaults",
                    "--collector.textfile",
                    f"--collector.textfile.directory={where['windows']}",
                ],
                windows_static,
                vm=vm,
            )
            continue
        port = port_for("fio-exporter", first_fio)
        first_fio = False
        # Every Linux guest gets a fio exporter: its sysfs disk facts (fio_guest_disk_info) join
        # the guest OS view to the VM disks even where another tool than fio runs.
        watch = [f"--fio.watch={where['stream']}"] if "stream" in where else []
        serve(
            f"fio-exporter-{vm}",
            port,
            [
                BIN / "fio-exporter",
                "serve",
                f"--web.listen-address=127.0.0.1:{port}",
                *watch,
                f"--fio.host={vm}",
                f"--collector.sysfs={where['sysfs']}",
                f"--fio.cache-size={cache}",
                f"--fio.scrape-interval={stack.fio_scrape_interval or stack.scrape_interval}",
            ],
            static,
            vm=vm,
        )
        # The guest OS view: node_exporter's diskstats collector on the guest's /proc/diskstats.
        # Its default --collector.diskstats.device-exclude keeps sdb and drops the partition sdb1.
        port = port_for("guest-node-exporter")
        serve(
            f"guest-node-exporter-{vm}",
            port,
            [
                "prometheus-node-exporter",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--path.procfs={where['procfs']}",
                f"--path.sysfs={where['sysfs']}",
                f"--path.udev.data={where['udev']}",
                "--collector.disable-defaults",
                "--collector.diskstats",
            ],
            node_static,
            vm=vm,
        )
        if "pgbench" in where:
            # The application view: pgbench's console output in the VM (its scenario's application),
            # followed by a pgbench exporter as one would run next to pgbench in the database VM.
            port = port_for("pgbench-exporter", first_pgbench)
            first_pgbench = False
            serve(
                f"pgbench-exporter-{vm}",
                port,
                [
                    BIN / "pgbench-exporter",
                    "serve",
                    f"--web.listen-address=127.0.0.1:{port}",
                    f"--pgbench.watch={where['pgbench']}",
                    f"--pgbench.cache-size={cache}",
                    f"--pgbench.scrape-interval={stack.scrape_interval}",
                ],
                pgbench_static,
                vm=vm,
            )
    jobs: list[dict[str, Any]] = []
    # One exporter on a collector host per tool whose output is shared rather than per VM, scraped
    # with the demo's interval: DiskSPD's results, copied off the Windows guests to one directory
    # (retention keeps the last few runs; the rules take each host's newest), and vdbench's
    # multi-host run (the controller's output directories, one per run, followed live).
    for tool, extra in (("diskspd", ["--diskspd.retention=5m"]), ("vdbench", [])):
        watched = sorted({where[tool] for where in paths.values() if tool in where})
        if not watched:
            continue
        port = port_for(f"{tool}-exporter", True)
        tool_static: list[dict[str, Any]] = []
        serve(
            f"{tool}-exporter",
            port,
            [
                BIN / f"{tool}-exporter",
                "serve",
                f"--web.listen-address=127.0.0.1:{port}",
                *(f"--{tool}.watch={w}" for w in watched),
                *extra,
                f"--{tool}.cache-size={cache}",
                f"--{tool}.scrape-interval={stack.scrape_interval}",
            ],
            tool_static,
        )
        jobs.append({"job_name": tool, "static_configs": tool_static})
    for proc in procs:
        stack.wait_http(proc, "/metrics")
    if static:
        job: dict[str, Any] = {"job_name": "fio", "static_configs": static}
        if stack.fio_scrape_interval:
            job["scrape_interval"] = job["scrape_timeout"] = stack.fio_scrape_interval
        jobs.append(job)
    if node_static:
        jobs.append({"job_name": "guest-node", "static_configs": node_static})
    if windows_static:
        jobs.append({"job_name": "guest-windows", "static_configs": windows_static})
    if pgbench_static:
        jobs.append({"job_name": "pgbench", "static_configs": pgbench_static})
    return jobs
