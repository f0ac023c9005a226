"""bench/gate.py: a bench's verdict fails on a miss, and `make bench` runs every bench before failing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import gate  # noqa: E402


def test_a_figure_over_its_limit_is_missed_and_the_verdict_exits_1(capsys):
    g = gate.Gate("bench/x.py")
    assert not g.check("report time", gate.of([21.0, 25.0, 19.0]), below=20, unit="s")
    out = capsys.readouterr().out
    assert "report time: min 19 / median 21 s over 3 runs (load " in out
    assert "[target median < 20 s: MISSED]" in out
    assert g.verdict() == 1
    assert "bench/x.py: MISSED 1 of 1 targets: report time" in capsys.readouterr().out


def test_a_figure_under_its_limit_is_met_and_the_verdict_exits_0(capsys):
    g = gate.Gate("bench/x.py")
    assert g.check("report time", gate.of([19.9, 30.0, 12.0]), below=20, unit="s")
    assert g.check("ratio baseline / ours", 5.0, at_least=5, unit="x")
    assert g.verdict() == 0
    assert "bench/x.py: all 2 targets met" in capsys.readouterr().out


def test_one_miss_among_several_fails_the_bench():
    g = gate.Gate("bench/x.py")
    g.check("a", 1.0, below=2)
    g.check("b", 4.99, at_least=5, unit="x")
    g.check("c", 1.0, below=2)
    assert [c.what for c in g.missed] == ["b"]
    assert g.verdict() == 1


def test_the_limit_itself_is_a_miss_for_below():
    g = gate.Gate("bench/x.py")
    assert not g.check("t", 2.0, below=2)
    assert g.verdict() == 1


@pytest.mark.parametrize(
    ("stat", "met"),
    [("min", True), ("median", True), ("max", False)],
)
def test_the_statistic_checked_is_the_one_named(stat, met):
    g = gate.Gate("bench/x.py")
    assert g.check("slowest probe", gate.of([3.0, 3.5, 5.2]), below=5, stat=stat) is met
    assert g.verdict() == (0 if met else 1)


def test_a_max_target_prints_the_max(capsys):
    g = gate.Gate("x")
    g.check("slowest probe, every run", gate.of([2.0, 2.5, 5.5]), below=5, unit="s", stat="max")
    out = capsys.readouterr().out
    assert "min 2 / median 2.5 s over 3 runs" in out
    assert ", max 5.5 s  [target max < 5 s: MISSED]" in out


def test_a_bench_that_could_not_measure_fails(capsys):
    g = gate.Gate("bench/x.py")
    assert g.cannot_measure("fio is not installed") == 1
    out = capsys.readouterr().out
    assert "measured: fio is not installed  [target: MISSED]" in out


def test_a_bench_without_any_target_fails():
    assert gate.Gate("bench/x.py").verdict() == 1


def test_a_yes_no_target():
    g = gate.Gate("bench/x.py")
    assert not g.require("the same queries for 10 and 100 VM disks", False, "72 and 73")
    assert g.verdict() == 1


def test_a_check_needs_exactly_one_limit():
    with pytest.raises(ValueError):
        gate.Gate("x").check("t", 1.0)
    with pytest.raises(ValueError):
        gate.Gate("x").check("t", 1.0, below=1, at_least=1)


def test_runs_record_the_load_of_each_value_and_timed_runs_count():
    calls = []
    runs = gate.timed(lambda: calls.append(time.sleep(0.01)), runs=3, warmup=1)
    assert len(calls) == 4 and len(runs.values) == 3 == len(runs.loads)
    assert all(v >= 0.01 for v in runs.values)
    assert runs.loads[0] == pytest.approx(os.getloadavg()[0], abs=5)
    text = gate.Runs([1.0, 2.0], [0.5, 3.25]).describe("s")
    assert text == f"min 1 / median 1.5 s over 2 runs (load 0.5-3.2 on {gate.CORES} cores)"


def test_paired_runs_alternate_and_record_each_pair_s_ratio():
    order: list[str] = []
    costs = iter([2.0, 1.0, 3.0, 1.5, 4.0, 4.0])

    def side(name: str):
        def run() -> float:
            order.append(name)
            return next(costs)

        return run

    pairs = gate.paired(side("ours"), side("base"), runs=3)
    assert order == ["ours", "base"] * 3
    assert pairs.ours.values == [2.0, 3.0, 4.0] and pairs.base.values == [1.0, 1.5, 4.0]
    assert pairs.ratio.values == [2.0, 2.0, 1.0]
    assert len(pairs.ratio.loads) == 3 and pairs.ratio.loads == pairs.ours.loads == pairs.base.loads


def test_paired_runs_stop_at_a_run_that_cannot_measure():
    def fails() -> float:
        raise gate.CannotMeasure("the tool failed")

    with pytest.raises(gate.CannotMeasure, match="the tool failed"):
        gate.paired(lambda: 1.0, fails, runs=3)


def test_a_ratio_of_medians_says_both_medians_and_how_many_runs(capsys):
    g = gate.Gate("bench/x.py")
    peer = gate.Runs([0.6, 0.5, 0.9], [1.0, 1.0, 2.5])
    ours = gate.Runs([0.4, 0.5, 0.45], [1.5, 1.0, 1.0])
    assert g.check_ratio("wall, peer / ours (medians)", peer, ours, at_least=1.0)  # 0.6 / 0.45
    assert not g.check_ratio("wall, ours / peer (medians)", ours, peer, at_least=1.0)
    assert g.check_ratio("ours / peer", ours, peer, below=1.0)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"  wall, peer / ours (medians): 1.33x = 0.6 s / 0.45 s, medians of 3 and 3 runs "
        f"(load 1.0-2.5 on {gate.CORES} cores)  [target >= 1x: met]"
    )
    assert out[1].endswith("[target >= 1x: MISSED]") and "0.75x = 0.45 s / 0.6 s" in out[1]
    assert out[2].endswith("[target < 1x: met]")
    assert g.verdict() == 1
    with pytest.raises(ValueError):
        g.check_ratio("t", peer, ours)


def test_the_process_tree_rss_counts_the_children():
    """A child holding 60 MB shows in the tree's sampled peak, as the report's figure workers do."""
    code = (
        "import subprocess, sys; "
        "subprocess.run([sys.executable, '-c', 'import time; b = bytearray(60 * 2**20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(1)'])"
    )
    done = gate.run_sampling_memory([sys.executable, "-c", code], timeout=30)
    assert done.returncode == 0
    assert done.peak_rss_mb > 60 and done.peak_pss_mb > 60
    assert done.cpu_seconds > 0


def test_the_calibration_is_measured_printed_and_printed_again_at_the_verdict(capsys):
    g = gate.Gate("bench/x.py")
    cal = g.calibrate(runs=2)
    assert cal.python_s > 0 and cal.numpy_s > 0 and cal.runs == 2
    out = capsys.readouterr().out
    assert out.startswith("bench/x.py: calibration: pure-Python kernel ")
    assert "numpy kernel " in out and "(CPU, min of 2, load " in out
    g.check("t", 1.0, below=2)
    assert g.verdict() == 0
    out = capsys.readouterr().out
    assert "bench/x.py: at the end, calibration: pure-Python kernel " in out
    assert out.index("at the end, calibration") < out.index("bench/x.py: all 1 targets met")


def test_the_kernels_do_fixed_work():
    """The same answer every call: the kernels measure the machine, never their input."""
    assert gate._py_kernel() == gate._py_kernel()
    assert gate._np_kernel() == gate._np_kernel()


def test_cpu_seconds_in_calibration_units():
    cal = gate.Calibration(python_s=0.05, numpy_s=0.1, runs=7, load=1.0)
    assert cal.units(0.5) == pytest.approx(10.0)
    assert cal.units(0.5, "numpy") == pytest.approx(5.0)


def test_a_cpu_target_is_checked_in_calibration_units(capsys):
    g = gate.Gate("bench/x.py")
    g.calibration = gate.Calibration(python_s=0.05, numpy_s=0.1, runs=7, load=1.0)
    # 4.0 s of CPU over 4,000 vdisks = 1 ms a vdisk = 0.02 units; 2 ms = 0.04 units
    assert g.check_cpu("probe", gate.of([4.0, 4.0, 8.0]), below=0.03, per=4000, per_what="vdisk")
    assert not g.check_cpu("probe", gate.of([8.0, 8.0]), below=0.03, per=4000, per_what="vdisk")
    out = capsys.readouterr().out
    assert "probe, CPU per vdisk in calibration units (python kernel): min 0.02 / median 0.02 over 3 runs" in out
    assert "[target median < 0.03: met]" in out and "[target median < 0.03: MISSED]" in out
    assert "= 1 ms CPU per vdisk (median)" in out and "= 2 ms CPU per vdisk (median)" in out
    assert g.verdict() == 1


def test_a_cpu_target_needs_the_calibration():
    with pytest.raises(RuntimeError):
        gate.Gate("x").check_cpu("t", 1.0, below=1)


def test_make_bench_runs_every_bench_then_fails_on_a_miss(tmp_path):
    missing = tmp_path / "a_misses.py"
    missing.write_text(
        "import sys; sys.path.insert(0, %r); import gate\n"
        "g = gate.Gate('a'); g.check('t', 3.0, below=2); sys.exit(g.verdict())\n" % str(REPO / "bench")
    )
    met = tmp_path / "b_meets.py"
    met.write_text(
        "import sys; sys.path.insert(0, %r); import gate\n"
        "g = gate.Gate('b'); g.check('t', 1.0, below=2); sys.exit(g.verdict())\n" % str(REPO / "bench")
    )
    r = subprocess.run(
        ["make", "-s", "-o", "deps", "bench", f"BENCH_RUNS={missing} {met},--flag"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "a: MISSED 1 of 1 targets: t" in r.stdout
    assert "b: all 1 targets met" in r.stdout  # the bench after the miss still ran
    assert f"benches that missed a target: {missing};" in r.stdout
    assert f">> {met} --flag" in r.stdout  # a run with arguments
    r = subprocess.run(
        ["make", "-s", "-o", "deps", "bench", f"BENCH_RUNS={met}"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every bench met its targets" in r.stdout


#: Benches another change is putting on gate.py (issue 24); xfail until then, not strict, so the
#: change that converts one passes without touching this list.
_NOT_YET_GATES: dict[str, str] = {}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(p.name, marks=pytest.mark.xfail(reason=_NOT_YET_GATES[p.name], strict=False))
        if p.name in _NOT_YET_GATES
        else p.name
        for p in sorted((REPO / "bench").glob("*.py"))
        if p.name != "gate.py"
    ],
)
def test_every_bench_is_a_gate(name):
    """Each bench make bench runs states its targets through gate.py and exits with its verdict
    (a bench that only prints figures cannot fail make bench)."""
    text = (REPO / "bench" / name).read_text()
    assert re.search(r"^import gate\b", text, re.MULTILINE), f"{name}: does not use bench/gate.py"
    assert ".verdict()" in text and re.search(r"\bg\.(check|check_cpu|check_ratio|require)\(", text), (
        f"{name}: no targets"
    )
    assert text.rstrip().endswith("sys.exit(main())"), f"{name}: does not exit with its verdict"
    # issue 34: figures from two machines compare only beside the machine's speed in that run
    assert re.search(r"\bg\.calibrate\(", text), f"{name}: does not measure and print the calibration"
