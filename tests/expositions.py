"""What the three exporters really expose, captured from running exporters (not from the docs):

- Stargate: the exporter served in-process, probing the Stargate simulator (zero-heavy, every CVM);
- vCenter: the exporter served in-process, probing the scenario vCenter simulator (Go, a real
  process) fed the zero-heavy trace;
- Prism: the exporter served in-process, probing the Prism simulator (clean-oltp-ahv, its clock
  frozen 25 s into a 30 s sample, so the probe integrates one sample);
- fio: a real 2 s fio run (read and write, json+ with status records) through ``fio-exporter
  convert``, and the guest disk facts of the misaligned scenario's simulated guest;
- node: Debian's node_exporter (diskstats collector, as the stack runs it per guest) on the
  misaligned scenario's simulated guest procfs, sysfs and udev database;
- windows: the windows_exporter metrics of the diskspd-zero-read scenario's simulated Windows guest,
  served by Debian's node_exporter textfile collector as the stack serves them (no windows_exporter
  runs on Linux; the simulator writes its names, labels and types).

- diskspd: ``diskspd-exporter convert`` of a DiskSPD result the guest simulator wrote for the
  diskspd-zero-read scenario (the document the exporter reads in the stack);
- vdbench: ``vdbench-exporter convert`` of the vdbench fixtures (a real two-host run and Flat.java's
  formats, tests/exporters/vdbench/fixtures).
- app: node_exporter's textfile collector serving the application contract's example
  (tests/exporters/pgbench/fixtures/app-contract.prom, docs/pgbench.md).
- pgbench: ``pgbench-exporter convert`` of the real pgbench outputs and logs of tests/exporters/pgbench/fixtures
  (PostgreSQL 9.x to 16, progress lines, summaries, aggregate logs), with the hygiene sizes set so
  that every hygiene family appears.
- esxtop: ``esxtop-exporter convert`` of the captures and vscsiStats outputs the esxtop simulator
  writes for zero-heavy's ESXi hosts (virtual disks, NFS datastores, VM CPU groups: what the stack's
  exporter reads) and of the built lab-host capture of tests/exporters/esxtop/fixtures (devices, paths and
  adapters with the kernel/driver latency split, which the simulator does not write).

The vCenter exposition is of the diskspd-zero-read scenario: its Windows VMs carry guest.disk,
which vcenter_vm_guest_disk_info comes from.

The dashboards' and the rules' tests check every metric name they use against these.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import requests
from prometheus_client.parser import text_string_to_metric_families

from ioparallax.simulators.scenario import compile_scenario, load_scenario
from tests.support import BUILD, ManagedProcess, free_port, require_built, require_tool, venv_tool

PASSWORD = "dash-Pa55"

# Series Prometheus itself makes: scrape health and the ALERTS of its rules.
PROMETHEUS_NAMES = {"up", "scrape_duration_seconds", "scrape_timeout_seconds", "ALERTS", "ALERTS_FOR_STATE"}


def _names(text: str) -> set[str]:
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def _stargate_exposition() -> str:
    from ioparallax.exporters.common.web.server import ExporterServer
    from ioparallax.exporters.stargate.cli import make_app
    from ioparallax.simulators.stargate.server import StargateCluster

    with StargateCluster("zero-heavy", clock=lambda: 1_700_000_000.0) as cluster:
        # discover=true follows the simulator's CVMs, which share one address on their own ports.
        ports = tuple(int(u.rsplit(":", 1)[1]) for u in cluster.urls.values())
        srv = ExporterServer(
            make_app(4, {"1000": {"vm": "bench-01", "disk": "scsi0:1"}}, 5.0, discovery_ports=ports), "127.0.0.1", 0
        ).start()
        try:
            target = cluster.urls["cvm-1"].split("://", 1)[1]
            r = requests.get(srv.url + "/probe", params={"target": target, "discover": "true"}, timeout=30)
            r.raise_for_status()
            return r.text
        finally:
            srv.stop()


def _stargate_unknown_fields_exposition() -> str:
    """A probe of pages holding fields the parser does not read (the mutated capture of
    tests/captures, replayed through the exporter's own probe and exposition): the parse
    coverage families with samples, which the simulator's pages never give."""
    from ioparallax.exporters.stargate.capture import read, replay

    path = Path(__file__).parent / "captures" / "mutated-extra-table-row-column.tar.gz"
    return replay(read(str(path)))[1].decode()


def _prism_unknown_fields_exposition() -> str:
    """The Prism capture of tests/captures replayed through the exporter with two stats keys it
    does not map added to each virtual disk (as another AOS version would send them): the parse
    coverage families with samples, which the simulator's answers never give."""
    import json

    from ioparallax.exporters.prism.capture import read, replay

    cap = read(str(Path(__file__).parent / "captures" / "prism-simulator-noisy-neighbour.tar.gz"))
    for ex in cap.exchanges:
        if "virtual_disks" in ex.path:
            doc = json.loads(ex.answer)
            for e in doc["entities"]:
                e["stats"].update({"hypervisor_num_unmap_io": "7", "controller.wss_120s_read_MB": "12"})
            ex.answer = json.dumps(doc).encode()
    text = replay(cap).decode()
    assert "prism_parse_unknown_field_entities{" in text, "the replay names the unmapped keys"
    return text


def _probe_in_process(make_app, load_config, conf: Path, password_env: str, target: str) -> str:
    """One /probe of ``target`` through a multi-target exporter (prism, vcenter) served in-process
    from the config file ``conf``, whose password is read from ``password_env``."""
    from ioparallax.exporters.common.web.server import ExporterServer

    os.environ[password_env] = PASSWORD
    app, targets = make_app(load_config(str(conf)))
    srv = ExporterServer(app, "127.0.0.1", 0).start()
    try:
        r = requests.get(
            srv.url + "/probe",
            params={"target": target},
            headers={"X-Prometheus-Scrape-Timeout-Seconds": "20"},
            timeout=60,
        )
        r.raise_for_status()
        return r.text
    finally:
        srv.stop()
        targets.close()
        os.environ.pop(password_env, None)


def _vcenter_exposition(tmp) -> str:
    from ioparallax.exporters.vcenter.cli import make_app
    from ioparallax.exporters.vcenter.config import load_config as load_vc_config

    sim_bin = BUILD / "vcsim-scenario"
    require_built(sim_bin)
    trace = tmp / "trace.json"
    trace.write_text(compile_scenario(load_scenario("diskspd-zero-read")).to_json())
    port = free_port()
    sim = ManagedProcess(
        "vcsim-scenario",
        [
            str(sim_bin),
            "-trace",
            str(trace),
            "-listen",
            f"127.0.0.1:{port}",
            "-username",
            "monitor",
            "-password",
            PASSWORD,
        ],
        tmp,
    )
    try:
        sim.wait_for_output(r"listening https://127\.0\.0\.1:\d+/sdk", timeout=120)
        conf = tmp / "vcenter.yml"
        conf.write_text(
            "defaults:\n  username: monitor\n  password_env: DASH_VC_PASSWORD\n"
            f"  insecure_skip_verify: true\ntargets:\n  127.0.0.1:{port}: {{}}\n"
        )
        return _probe_in_process(make_app, load_vc_config, conf, "DASH_VC_PASSWORD", f"127.0.0.1:{port}")
    finally:
        sim.stop()


def _prism_exposition(tmp) -> str:
    from ioparallax.exporters.prism.cli import make_app
    from ioparallax.exporters.prism.config import load_config as load_prism_config
    from ioparallax.simulators.prism.server import PrismSimulator

    frozen = 1_700_000_010.0 + 15 + 30 * 1000  # 25 s after a sample's end: the answer is dated
    with PrismSimulator("clean-oltp-ahv", clock=lambda: frozen, auth=("monitor", PASSWORD)) as sim:
        target = f"127.0.0.1:{sim.port}"
        conf = tmp / "prism.yml"
        conf.write_text(
            "defaults:\n  username: monitor\n  password_env: DASH_PRISM_PASSWORD\n  scheme: http\n"
            f"targets:\n  {target}: {{}}\n"
        )
        return _probe_in_process(make_app, load_prism_config, conf, "DASH_PRISM_PASSWORD", target)


def _fio_exposition(tmp) -> str:
    fio = require_tool("fio")
    out = tmp / "fio-status.json"
    subprocess.run(
        [
            fio,
            "--name=mix",
            f"--filename={tmp / 'data'}",
            "--size=8m",
            "--rw=randrw",
            "--bs=4k",
            "--iodepth=4",
            "--ioengine=psync",
            "--time_based",
            "--runtime=2",
            "--status-interval=1",
            "--output-format=json+",
            f"--output={out}",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    r = subprocess.run(
        [venv_tool("fio-exporter"), "convert", str(out)], check=True, capture_output=True, text=True, timeout=60
    )
    return r.stdout


def _fio_guest_exposition(tmp) -> str:
    """The guest disk facts of a simulated guest (the misaligned scenario: one partition at 1536
    bytes), read by the fio exporter's own collector."""
    from prometheus_client import CollectorRegistry, generate_latest

    from ioparallax.exporters.fio.guestdisk import GuestDiskCollector
    from ioparallax.simulators.guest.sysfs import write_tree

    scenario = load_scenario("misaligned")
    vm = next(v for v in scenario.vms if v.name == "misaligned-01")
    root = write_tree(vm, tmp / "sysfs")
    reg = CollectorRegistry(auto_describe=False)
    reg.register(GuestDiskCollector(str(root)))
    return generate_latest(reg).decode()


def _node_exporter(tmp, name: str, *flags: str) -> str:
    """One scrape of a real node_exporter started with ``flags`` on a free loopback port."""
    from tests.support import wait_for_http

    require_tool("prometheus-node-exporter")
    port = free_port()
    proc = ManagedProcess(name, ["prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}", *flags], tmp)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/metrics", proc=proc)
        return requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        proc.stop()


def _textfile_flags(directory) -> list[str]:
    """node_exporter with only its textfile collector, reading ``directory``."""
    return ["--collector.disable-defaults", "--collector.textfile", f"--collector.textfile.directory={directory}"]


def _guest_tree(directory: Path, scenario: str, vm: str) -> dict[str, str]:
    """The guest simulator's files of ``vm`` a minute after its anchor; where they are."""
    from ioparallax.simulators.guest.writer import GuestWriter

    writer = GuestWriter(compile_scenario(load_scenario(scenario)), directory, vms=[vm])
    where = writer.setup()[vm]
    writer.write(writer.fio.anchor + 60)
    return where


def _node_exposition(tmp) -> str:
    """node_exporter's diskstats of a simulated guest (misaligned-01), as the stack's job guest-node."""
    where = _guest_tree(tmp / "guests", "misaligned", "misaligned-01")
    return _node_exporter(
        tmp,
        "guest-node-exporter",
        f"--path.procfs={where['procfs']}",
        f"--path.sysfs={where['sysfs']}",
        f"--path.udev.data={where['udev']}",
        "--collector.disable-defaults",
        "--collector.diskstats",
    )


def _windows_exposition(tmp) -> str:
    """windows_exporter's disk and host name metrics of a simulated Windows guest (winbench-01 of
    diskspd-zero-read), through node_exporter's textfile collector as the stack's job guest-windows."""
    where = _guest_tree(tmp / "wguests", "diskspd-zero-read", "winbench-01")
    return _node_exporter(tmp, "guest-windows-textfile", *_textfile_flags(where["windows"]))


def _diskspd_exposition(tmp) -> str:
    from ioparallax.simulators.guest.diskspd import GuestDiskspd

    sim = GuestDiskspd(compile_scenario(load_scenario("diskspd-zero-read")), anchor=1_800_000_000)
    doc = tmp / "WINBENCH01-1800000000.xml"
    doc.write_text(sim.document("winbench-01", 1_800_000_000), encoding="utf-8")
    r = subprocess.run(
        [venv_tool("diskspd-exporter"), "convert", str(doc)], check=True, capture_output=True, text=True, timeout=60
    )
    return r.stdout


def _pgbench_exposition(tmp) -> str:
    from pathlib import Path

    fixtures = Path(__file__).parent / "exporters" / "pgbench" / "fixtures"
    files = sorted(str(p) for p in fixtures.iterdir() if p.suffix in (".out", ".log"))
    r = subprocess.run(
        [venv_tool("pgbench-exporter"), "convert", "--pgbench.shared-buffers=4GiB", *files],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return r.stdout


def _app_exposition(tmp) -> str:
    """An application following the contract of docs/pgbench.md (tests/exporters/pgbench/fixtures/app-contract.prom),
    served by node_exporter's textfile collector as a guest's node_exporter would."""
    import shutil
    from pathlib import Path

    require_tool("prometheus-node-exporter")
    textfiles = tmp / "app-textfile"
    textfiles.mkdir()
    shutil.copy(
        Path(__file__).parent / "exporters" / "pgbench" / "fixtures" / "app-contract.prom", textfiles / "app.prom"
    )
    return _node_exporter(tmp, "app-node-exporter", *_textfile_flags(textfiles))


def _vdbench_exposition(tmp) -> str:
    from pathlib import Path

    fixtures = Path(__file__).parent / "exporters" / "vdbench" / "fixtures"
    dirs = sorted(str(p) for p in fixtures.iterdir() if p.is_dir())
    r = subprocess.run([venv_tool("vdbench-exporter"), "convert", *dirs], capture_output=True, text=True, timeout=60)
    return r.stdout


def _esxtop_exposition(tmp) -> str:
    out = tmp / "esxtop"
    subprocess.run(
        [venv_tool("esxtop-simulator"), "zero-heavy", "--out", str(out), "--samples", "5"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    lab = Path(__file__).parent / "exporters" / "esxtop" / "fixtures" / "built-lab-host.csv"
    files = [*sorted(str(p) for p in out.glob("*.csv")), str(lab)]
    r = subprocess.run(
        [venv_tool("esxtop-exporter"), "convert", *files], check=True, capture_output=True, text=True, timeout=60
    )
    return r.stdout
