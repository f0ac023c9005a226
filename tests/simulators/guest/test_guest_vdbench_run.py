"""The vdbench multi-host run of the simulated Linux guests: one output directory per period,
followed live, read back by the vdbench exporter to the trace's numbers per host."""

import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ioparallax.simulators.guest.writer import GuestWriter
from ioparallax.simulators.scenario import compile_scenario, load_scenario
from tests.support import venv_tool

T0 = 1_800_000_000  # a multiple of the 600 s period


@pytest.fixture(scope="module")
def trace():
    return compile_scenario(load_scenario("vdbench-multihost"))


def convert(path) -> dict:
    out = subprocess.run(
        [venv_tool("vdbench-exporter"), "convert", str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(out.stdout)
        for s in fam.samples
    }


def test_one_run_per_period_its_hosts_are_the_guests(tmp_path, trace):
    writer = GuestWriter(trace, tmp_path, anchor=T0)
    paths = writer.setup()
    assert {p["vdbench"] for p in paths.values()} == {str(tmp_path / "vdbench")}
    assert "stream" not in paths["hci-vdb-01"] and "sysfs" in paths["hci-vdb-01"]
    for T in range(T0, T0 + 30):
        writer.write(T)
    (run,) = (tmp_path / "vdbench").iterdir()
    assert run.name == f"run-{T0}"
    parm = (run / "parmfile.html").read_text()
    assert "hd=hci-vdb-01,system=hci-vdb-01" in parm and "lun=/dev/sdb,openflags=o_direct" in parm
    assert "compratio=2" in parm and "threads=4" in parm
    m = convert(run)
    src = str(run)
    for vm in trace.scenario.vms:
        key = (("host", vm.hostname), ("run", "rd1"), ("seq", "1"), ("source", src))
        # 30 interval rows: seconds 0..29 of the period (each row is the second before it)
        truth = trace.window(vm.disks[0], end=29, seconds=30)
        assert m[("vdbench_host_read_ops_total", key)] == pytest.approx(truth.read_ops, rel=1e-3)
        assert m[("vdbench_host_finished", key)] == 0
    assert (
        m[
            (
                "vdbench_run_hygiene_problem",
                (("problem", "compratio_requested"), ("run", "rd1"), ("seq", "1"), ("source", src)),
            )
        ]
        == 1
    )


def test_the_run_ends_with_the_period_and_a_new_one_starts(tmp_path, trace):
    writer = GuestWriter(trace, tmp_path, anchor=T0)
    writer.setup()
    for T in range(T0 + 590, T0 + 605):
        writer.write(T)
    runs = sorted(p.name for p in (tmp_path / "vdbench").iterdir())
    assert runs == [f"run-{T0}", f"run-{T0 + 600}"]
    m = convert(tmp_path / "vdbench" / f"run-{T0}")
    key = (("host", "hci-vdb-02"), ("run", "rd1"), ("seq", "1"), ("source", str(tmp_path / "vdbench" / f"run-{T0}")))
    assert m[("vdbench_host_finished", key)] == 1
    assert "avg_2-" in (tmp_path / "vdbench" / f"run-{T0}" / "flatfile.html").read_text()
    # a simulator suspended for an hour writes no backlog: at most one period of rows
    writer.write(T0 + 3600 + 10)
    assert sorted(p.name for p in (tmp_path / "vdbench").iterdir())[-1] == f"run-{T0 + 3600}"
    assert len(list((tmp_path / "vdbench").iterdir())) == 2
