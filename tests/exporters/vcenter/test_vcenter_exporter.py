"""The exporter against the scenario simulator: exact values, counters that integrate every
sample, joins, exposition format, shared collections, the CLI."""

from __future__ import annotations

import threading

import pytest
import requests

from tests.simulators.vcenter.test_vcenter_simulator import FROZEN, T0
from tests.support import metric_value as value, promtool_check_metrics, run_entry_point

from .conftest import insecure_config

ENV = {"VC_TEST_PASSWORD": "s3cret-Pa55"}


def frozen_and_probed(scenario_sim, exporter, path, *flags: str):
    """The scenario simulator frozen at FROZEN on the trace ``path`` (with ``flags``), an exporter,
    and its first probe of the simulator, which must be up: the address, the exporter, the probe."""
    address, _ = scenario_sim(path, "-freeze-at", FROZEN, *flags)
    exp = exporter(insecure_config(), ENV)
    m = exp.probe(address)
    assert value(m, "vcenter_up") == 1
    return address, exp, m


def test_latest_sample_and_identities(scenario_sim, bursty_trace, exporter):
    path, trace = bursty_trace
    address, exp, m = frozen_and_probed(scenario_sim, exporter, path)
    labels = {"vm": "burst-01", "disk": "scsi0:1"}
    # vCenter's chart: 20,480 KBps at 80 ms for a 1 s burst of ~400 MiB/s
    assert value(m, "vcenter_virtual_disk_sample_write_bytes_per_second", **labels) == 20480 * 1024
    assert value(m, "vcenter_virtual_disk_sample_write_latency_seconds", **labels) == 0.08
    assert value(m, "vcenter_virtual_disk_sample_write_latency_precise_seconds", **labels) == 0.08
    assert value(m, "vcenter_virtual_disk_sample_write_ops_per_second", **labels) == 20
    assert value(m, "vcenter_virtual_disk_sample_write_io_size_bytes", **labels) == 1048576
    assert value(m, "vcenter_virtual_disk_sample_read_bytes_per_second", **labels) == 0, "zeros kept"
    assert value(m, "vcenter_virtual_disk_sample_timestamp_seconds", **labels) == T0
    disk = trace.disks[0]
    info = value(
        m,
        "vcenter_virtual_disk_info",
        **labels,
        disk_uuid=disk.uuid,
        backing_file=disk.backing_file,
        datastore="ctr01",
        host="esx-01",
    )
    assert info == 1
    assert value(m, "vcenter_vm_info", vm="burst-01", host="esx-01", power_state="poweredOn") == 1
    assert value(m, "vcenter_virtual_disk_capacity_bytes", **labels) == disk.capacity_bytes


def test_counters_integrate_every_sample_since_the_last_seen(scenario_sim, bursty_trace, exporter):
    """A probe after a gap (here 200 s: ten 20 s samples) integrates all ten, so the counters
    grow by exactly the bytes, ops and latency x ops of the ground truth."""
    path, trace = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    exp = exporter(insecure_config(), ENV)
    labels = {"vm": "burst-01", "disk": "scsi0:1"}
    first = exp.probe(address)
    assert value(first, "vcenter_virtual_disk_samples_total", **labels) == 1
    # The previous probe saw the sample that ended 200 s ago (the exporter's own state).
    (state,) = exp.targets.get(address).states.values()
    state.last_timestamp = T0 - 200
    second = exp.probe(address)
    truth = trace.window(trace.disks[0], T0 % trace.period, 200)

    def delta(name):
        return value(second, name, **labels) - value(first, name, **labels)

    assert delta("vcenter_virtual_disk_samples_total") == 10
    assert value(second, "vcenter_perf_new_samples") == 10
    assert delta("vcenter_virtual_disk_write_bytes_total") == truth.write_bytes == 10 * 400 * 2**20
    assert delta("vcenter_virtual_disk_write_ops_total") == truth.write_ops == 4000
    assert abs(delta("vcenter_virtual_disk_write_latency_seconds_total") - truth.write_latency_sum_s) < 1e-9
    assert delta("vcenter_virtual_disk_read_bytes_total") == 0
    # a third probe with nothing new adds nothing
    third = exp.probe(address)
    assert value(third, "vcenter_perf_new_samples") == 0
    assert value(third, "vcenter_virtual_disk_write_bytes_total", **labels) == value(
        second, "vcenter_virtual_disk_write_bytes_total", **labels
    )


def test_exposition_passes_promtool(scenario_sim, postgres_trace, exporter):
    path, _ = postgres_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN)
    exp = exporter(insecure_config(), ENV)
    r = requests.get(f"{exp.server.url}/probe", params={"target": address}, timeout=30)
    code, text = r.status_code, r.text
    assert code == 200
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert 'disk="scsi0:2"' in text
    result = promtool_check_metrics(text)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


def test_batches_respect_max_query_metrics(scenario_sim, postgres_trace, exporter):
    path, _ = postgres_trace
    # 15 counters x 1 ("*") per VM: a limit of 15 forces one VM per query; 16 VMs -> 16 queries
    _, _, m = frozen_and_probed(scenario_sim, exporter, path, "-max-query-metrics", "15", "-vms", "15")
    assert value(m, "vcenter_perf_queries") == 16
    assert len(m["vcenter_virtual_disk_samples_total"]) == 2 + 15 * 2


def test_overlapping_probes_share_one_collection(scenario_sim, bursty_trace, exporter):
    path, _ = bursty_trace
    address, _ = scenario_sim(path, "-freeze-at", FROZEN, "-method-delay", "QueryPerf:1500")
    exp = exporter(insecure_config(), ENV)
    results = []

    def probe():
        results.append(exp.probe(address, timeout=10))

    threads = [threading.Thread(target=probe) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [value(m, "vcenter_up") for m in results] == [1, 1, 1]
    assert sorted(value(m, "vcenter_probe_shared_collection") for m in results) == [0, 1, 1]
    assert exp.targets.get(address).collections == 1


def test_cli_help_and_config_errors(tmp_path):
    out = run_entry_point("vcenter-exporter", ["--help"])
    assert out.returncode == 0 and "/probe?target=" in out.stdout and "--config.file" in out.stdout
    bad = tmp_path / "bad.yml"
    bad.write_text("targets:\n  vc1:\n    username: x\n    insecure_skip_verify: maybe\n")
    out = run_entry_point("vcenter-exporter", ["--config.file", str(bad)])
    assert out.returncode == 2
    assert str(bad) in out.stderr and "targets.vc1.insecure_skip_verify" in out.stderr


def test_tls_opt_out_alias_and_contradiction(tmp_path):
    """insecure_skip_verify is the key; tls_verify (Prism's older spelling) its alias with the
    opposite meaning, the same in the three network exporters; contradicting both is an error."""
    from ioparallax.exporters.vcenter.config import load_config
    from ioparallax.yamlconf import ConfigError

    path = tmp_path / "vc.yml"
    path.write_text(
        "defaults:\n  username: u\n  password: p\ntargets:\n  vc1:\n    tls_verify: false\n"
        "  vc2:\n    insecure_skip_verify: true\n  vc3: {}\n"
    )
    cfg = load_config(str(path), env={})
    skip = {k: t.insecure_skip_verify for k, t in cfg.targets.items()}
    assert skip == {"vc1:443": True, "vc2:443": True, "vc3:443": False}
    path.write_text("targets:\n  vc1:\n    insecure_skip_verify: false\n    tls_verify: false\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(path), env={})
    assert str(path) in str(err.value) and "targets.vc1.tls_verify: tls_verify: false contradicts" in str(err.value)
