"""Console programs whose reader goes away (``ioparallax-check job.fio | head -1``): they end
quietly, exit status 141 as a tool ended by SIGPIPE, no traceback (ioparallax/pipes.py). Real
pipes: the programs run as subprocesses writing into ``head -1`` or into a pipe whose reader has
closed."""

from __future__ import annotations

import json
import subprocess

import pytest

from ioparallax.pipes import EXIT_STDOUT_CLOSED, quiet_on_closed_stdout
from tests.exporters.diskspd.test_diskspd_faults import GOOD
from tests.exporters.pgbench.test_pgbench_reader import PG14
from tests.exporters.vdbench.test_vdbench_reader import MULTI
from tests.report.test_usl_cli import SPECSDM91
from tests.support import venv_tool


def _into_head(argv: list[str]) -> tuple[int, bytes, str]:
    """``argv | head -1``: the program's exit status, what head printed, the program's stderr."""
    prog = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.Popen(["head", "-1"], stdin=prog.stdout, stdout=subprocess.PIPE)
    prog.stdout.close()  # type: ignore[union-attr]  # head holds the only read end
    first, _ = head.communicate(timeout=60)
    err = prog.stderr.read().decode()  # type: ignore[union-attr]
    return prog.wait(timeout=60), first, err


def _into_closed_pipe(argv: list[str]) -> tuple[int, str]:
    """The program writes into a pipe whose read end is already closed (a reader that quit
    before the first line): every write fails, however little is written."""
    prog = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    prog.stdout.close()  # type: ignore[union-attr]
    _, err = prog.communicate(timeout=60)
    return prog.returncode, err.decode()


@pytest.fixture
def many_jobs(tmp_path):
    """A fio job file of 3,000 jobs: ioparallax-check prints ~290 KB about it, far more than a
    pipe holds, so it is still writing when head exits."""
    path = tmp_path / "many.fio"
    path.write_text("[global]\nioengine=libaio\nsize=1g\n" + "".join(f"[job{i}]\nrw=randread\n" for i in range(3000)))
    return path


def test_check_into_head_ends_quietly_with_141(many_jobs):
    code, first, err = _into_head([venv_tool("ioparallax-check"), str(many_jobs)])
    assert first == f"fio {many_jobs}:\n".encode()
    assert err == ""
    assert code == EXIT_STDOUT_CLOSED == 141


def test_check_reaches_its_end_with_a_reader_that_reads_everything(many_jobs):
    done = subprocess.run([venv_tool("ioparallax-check"), str(many_jobs)], capture_output=True, timeout=60)
    assert done.returncode in (0, 1) and len(done.stdout) > 100_000 and b"Traceback" not in done.stderr


@pytest.fixture
def inputs(tmp_path, many_jobs):
    """What each program reads: a fio job file, a fio result of 1,000 jobs, a real vdbench run, a
    real DiskSPD result, a USL ramp, a real pgbench 14 output."""
    jobs = [
        {
            "jobname": f"j{i}",
            "job options": {"rw": "randread"},
            "read": {"io_bytes": 4096, "total_ios": 1, "runtime": 1, "iops": 1.0, "bw_bytes": 4096.0},
        }
        for i in range(1000)
    ]
    fio = tmp_path / "big.json"
    fio.write_text(json.dumps({"fio version": "fio-3.33", "timestamp_ms": 1700000000000, "jobs": jobs}, indent=2))
    usl = tmp_path / "ramp.csv"
    usl.write_text(SPECSDM91)
    return {"MANY": many_jobs, "FIO": fio, "VDBENCH": MULTI, "DISKSPD": GOOD, "USL": usl, "PGBENCH": PG14}


@pytest.mark.parametrize(
    "argv",
    [
        ["ioparallax-check", "MANY"],
        ["ioparallax-scenario", "list"],
        ["ioparallax-scenario", "identities", "clean-oltp"],
        ["ioparallax-report", "usl", "--csv", "USL"],
        ["fio-exporter", "convert", "FIO"],
        ["vdbench-exporter", "convert", "VDBENCH"],
        ["diskspd-exporter", "convert", "DISKSPD"],
        ["pgbench-exporter", "convert", "PGBENCH"],
    ],
    ids=lambda a: " ".join(a),
)
def test_every_program_that_prints_ends_quietly_when_its_reader_has_gone(argv, inputs):
    argv = [venv_tool(argv[0]), *(str(inputs.get(a, a)) for a in argv[1:])]
    code, err = _into_closed_pipe(argv)
    assert "Traceback" not in err and "Broken pipe" not in err, err
    assert code == 141


@pytest.mark.parametrize("program", ["ioparallax-mixin", "ioparallax-check", "fio-exporter"])
def test_help_into_a_closed_pipe_is_quiet(program):
    """argparse drops a failed write of --help itself and exits 0, which is quiet too."""
    code, err = _into_closed_pipe([venv_tool(program), "--help"])
    assert err == "" and code in (0, 141)


def test_a_broken_pipe_that_is_not_stdout_is_not_hidden():
    """A BrokenPipeError from a socket (a Prometheus that hung up) while stdout is fine is an
    error as before, not a quiet exit."""

    @quiet_on_closed_stdout
    def main() -> int:
        raise BrokenPipeError(32, "Broken pipe (a socket)")

    with pytest.raises(BrokenPipeError, match="a socket"):
        main()


def test_a_main_that_returns_keeps_its_exit_status():
    assert quiet_on_closed_stdout(lambda: 2)() == 2
