"""Real fio 3.33 runs shared by the fio tests: each output form produced once per session.

Runs are 1-3 s on small files under pytest's temp dir (on this machine /tmp is ext4, so
``direct=1`` works; the tests that need it say so).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from ioparallax.simulators.process import Process
from tests.support import ManagedProcess, fio_job_args as job_args, free_port, require_tool, start_exporter

# Only the tests that run fio ask for `fio_bin`, directly or through `fio_work` and the result
# fixtures; without fio they fail (`make deps` installs it), the others run everywhere.


@pytest.fixture(scope="session")
def fio_bin() -> str:
    """The fio binary; the test fails when fio is not installed (tests/support.require_tool)."""
    return require_tool("fio")


def run_fio(args: list[str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run([require_tool("fio"), *args], cwd=cwd, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"fio {' '.join(args)} failed: {proc.stderr.decode()}"
    return proc


def fio_output(work: Path, output: str, name: str, **job) -> Path:
    """Runs the job of ``fio_job_args(name, work, **job)`` with ``--output=work/output``; that file."""
    out = work / output
    job["extra"] = (*job.get("extra", ()), f"--output={out}")
    run_fio(job_args(name, work, **job), work)
    return out


def decode_all(text: str) -> list[dict]:
    """fio's documents decoded the plain way (independent of the reader): every ``{`` at a line
    start begins a document; used as the expected values."""
    dec = json.JSONDecoder()
    docs, i = [], 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return docs
        if i > 0 and text[i - 1] != "\n":
            i += 1
            continue
        doc, i = dec.raw_decode(text, i)
        docs.append(doc)


JOBFILE = """\
[global]
directory={dir}
size=4m
direct=1
ioengine=libaio
runtime=1
time_based
[rr]
rw=randread
bs=4k
iodepth=4
numjobs=2
[sw]
rw=write
bs=64k
"""


@pytest.fixture(scope="session")
def fio_work(tmp_path_factory, fio_bin) -> Path:
    """Where the session's fio runs write (asks for fio_bin: every fixture built on it needs fio)."""
    return tmp_path_factory.mktemp("fio")


@pytest.fixture(scope="session")
def jsonplus_result(fio_work) -> Path:
    """json+ final result: global options, numjobs=2 (duplicate job names), two directions."""
    (fio_work / "j.fio").write_text(JOBFILE.format(dir=fio_work))
    out = fio_work / "result.json"
    run_fio(["j.fio", "--output-format=json+", f"--output={out}"], fio_work)
    return out


@pytest.fixture(scope="session")
def plain_json_result(fio_work) -> Path:
    return fio_output(
        fio_work, "plain.json", "plain", size="2m", rw="randwrite", runtime=1, extra=("--output-format=json",)
    )


@pytest.fixture(scope="session")
def status_stream(fio_work) -> Path:
    """json+ --status-interval=1 for 3 s: concatenated cumulative records."""
    extra = ("--direct=1", "--output-format=json+", "--status-interval=1")
    return fio_output(fio_work, "stream.json", "st", size="4m", rw="randread", runtime=3, extra=extra)


@pytest.fixture(scope="session")
def unified_gtod_result(fio_work) -> Path:
    """unified_rw_reporting (a 'mixed' direction) with gtod_reduce (no latency data)."""
    extra = ("--unified_rw_reporting=1", "--gtod_reduce=1", "--output-format=json+")
    return fio_output(fio_work, "unified.json", "u", size="2m", rw="randrw", runtime=1, extra=extra)


@pytest.fixture(scope="session")
def stdout_with_note(fio_work) -> Path:
    """fio's stdout as a file: psync with iodepth=4 makes fio print a real 'note:' line first."""
    out = fio_work / "stdout.json"
    extra = ("--iodepth=4", "--output-format=json")
    proc = run_fio(job_args("n", fio_work, size="1m", rw="read", runtime=1, extra=extra), fio_work)
    out.write_bytes(proc.stdout)
    assert proc.stdout.startswith(b"note:"), proc.stdout[:200]
    return out


@pytest.fixture(scope="session")
def client_results(fio_work, fio_bin, tmp_path_factory):
    """fio --server on a free loopback port; a client json+ result and a client status-interval run."""
    port = free_port()
    logs = tmp_path_factory.mktemp("fio-server")
    server = ManagedProcess("fio-server", [fio_bin, f"--server=ip:127.0.0.1,{port}"], logs, cwd=fio_work)
    try:
        for runtime in (1, 3):
            (fio_work / f"c{runtime}.fio").write_text(
                f"[global]\ndirectory={fio_work}\nsize=2m\nioengine=psync\nruntime={runtime}\n"
                "time_based\n[cr]\nrw=randread\nbs=4k\nnumjobs=2\n"
            )
        final = fio_work / "client.json"
        interim = fio_work / "client-status.json"
        last_err = ""
        for _ in range(50):  # the server needs a moment before it accepts connections
            proc = subprocess.run(
                [fio_bin, f"--client=ip:127.0.0.1,{port}", "c1.fio", "--output-format=json+", f"--output={final}"],
                cwd=fio_work,
                capture_output=True,
                timeout=60,
            )
            if proc.returncode == 0 and final.exists() and final.stat().st_size:
                break
            last_err = proc.stderr.decode() + proc.stdout.decode()
            time.sleep(0.1)
        else:
            pytest.fail(f"fio --client never succeeded: {last_err}\n{server.output()}")
        run_fio(
            [
                f"--client=ip:127.0.0.1,{port}",
                "c3.fio",
                "--output-format=json",
                "--status-interval=1",
                f"--output={interim}",
            ],
            fio_work,
        )
        yield {"final": final, "interim": interim, "host": f"127.0.0.1:{port}"}
    finally:
        server.stop()


def start_fio_exporter(processes, *args) -> tuple[int, Process]:
    """fio-exporter on a free loopback port (:func:`tests.support.start_exporter`)."""
    return start_exporter(processes, "fio-exporter", *args)
