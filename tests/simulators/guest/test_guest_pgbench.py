"""pgbench's console output of the simulated guests whose scenario has an application: read back
by pgbench-exporter to the scenario's truth (the VM's I/O over ios_per_transaction)."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from ioparallax.simulators.guest.pgbench import output_path, truth
from ioparallax.simulators.guest.writer import GuestWriter
from ioparallax.simulators.scenario import compile_scenario, parse_scenario, scenario_path
from ioparallax.yamlconf import ConfigError
from tests.support import samples, value, venv_tool

T0 = 1_800_000_000  # a multiple of the 600 s period: the run starts at period second 0


def scenario(application: dict | None, **vm):
    data = yaml.safe_load(scenario_path("postgres").read_text())
    if application is not None:
        data["vms"][0]["application"] = application
    data["vms"][0].update(vm)
    return parse_scenario(data, "postgres-app.yaml")


@pytest.fixture(scope="module")
def trace():
    return compile_scenario(
        scenario({"kind": "pgbench", "ios_per_transaction": 40, "clients": 8, "failure_ratio": 0.01, "version": "16.4"})
    )


def convert(path) -> dict:
    out = subprocess.run(
        [venv_tool("pgbench-exporter"), "convert", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return samples(out.stdout)


def test_a_period_is_one_pgbench_run_with_the_truths_transactions(tmp_path, trace):
    writer = GuestWriter(trace, tmp_path, anchor=T0)
    paths = writer.setup()
    assert paths["pg-01"]["pgbench"] == str(tmp_path / "pg-01" / "pgbench")
    period = trace.period
    for T in range(T0 + 1, T0 + period + 1):  # seconds [T0, T0 + period): one whole run
        writer.write(T)
    out = output_path(tmp_path, "pg-01")
    vm = trace.scenario.vms[0]
    ok = sum(truth(trace, vm, t)[0] for t in range(period))
    failed = sum(truth(trace, vm, t)[1] for t in range(period))
    sm = convert(out)
    src = str(out)
    # whole transactions: the fractions of the last second may stay unprinted
    assert ok - 1 < value(sm, "pgbench_transactions_total", source=src, run=1) <= ok
    assert failed - 1 < value(sm, "pgbench_failed_transactions_total", source=src, run=1) <= failed
    assert value(sm, "pgbench_run_reported_transactions", source=src, run=1) == value(
        sm, "pgbench_transactions_total", source=src, run=1
    )
    assert value(sm, "pgbench_intervals_total", source=src, run=1) == period // 5
    assert value(sm, "pgbench_run_duration_seconds", source=src, run=1) == period
    assert value(sm, "pgbench_run_clients", source=src, run=1) == 8
    # the checkpoint bursts of the scenario show in the application: tps follows the I/O
    lines = [line for line in out.read_text().splitlines() if line.startswith("progress:")]
    tps = [float(line.split(", ")[1].split()[0]) for line in lines]
    assert max(tps) > 3 * min(tps)
    assert lines[0].startswith("progress: 5.0 s, ") and lines[0].endswith(" failed")


def test_the_next_period_appends_the_next_run(tmp_path, trace):
    writer = GuestWriter(trace, tmp_path, anchor=T0)
    writer.setup()
    for T in range(T0 + 1, T0 + trace.period + 31):
        writer.write(T)
    sm = convert(output_path(tmp_path, "pg-01"))
    src = str(output_path(tmp_path, "pg-01"))
    assert value(sm, "pgbench_run_finished", source=src, run=1) == 1
    assert value(sm, "pgbench_intervals_total", source=src, run=2) == 6  # 30 s of the next run
    assert value(sm, "pgbench_run_finished", source=src, run=2) == 1  # convert: the file has ended


def test_pgbench_14_prints_no_failures(tmp_path):
    trace = compile_scenario(scenario({"kind": "pgbench", "version": "14.7", "failure_ratio": 0.05}))
    writer = GuestWriter(trace, tmp_path, anchor=T0)
    writer.setup()
    for T in range(T0 + 1, T0 + 11):
        writer.write(T)
    text = output_path(tmp_path, "pg-01").read_text()
    assert text.startswith("pgbench (14.7)\n") and " failed" not in text


@pytest.mark.parametrize(
    "application, key",
    [
        ({"kind": "hammerdb"}, "kind"),
        ({"kind": "pgbench", "ios_per_transaction": 0}, "ios_per_transaction"),
        ({"kind": "pgbench", "failure_ratio": 1}, "failure_ratio"),
        ({"kind": "pgbench", "clients": 0}, "clients"),
        ({"kind": "pgbench", "version": "fifteen"}, "version"),
        ({"kind": "pgbench", "cpu": 2}, "cpu"),
    ],
)
def test_application_errors_name_the_key(application, key):
    with pytest.raises(ConfigError, match=rf"vms\[0\]\.application\.{key}"):
        scenario(application)
