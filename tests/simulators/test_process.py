"""The one process helper (ioparallax/simulators/process.py) that the demo stack, the tests and the benches
start their children with: log file, session, stop by PID (TERM, then KILL), wait for HTTP, and
children that die with the process that started them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ioparallax.simulators.process import free_port, start, stop_all, wait_for_http
from tests.support import NotReadyYet

PY = sys.executable
REPO = Path(__file__).resolve().parent.parent.parent


def _gone(pid: int) -> bool:
    """No such process, or a zombie (dead, not yet reaped by whoever inherited it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_output_goes_to_the_log_and_the_child_runs_in_its_own_session(tmp_path):
    script = (
        "import os, sys; print(os.environ['IOP_X'], os.getcwd(), repr(sys.stdin.read()), "
        "os.getsid(0) == os.getpgrp() == os.getpid()); print('to stderr', file=sys.stderr)"
    )
    p = start("child", [PY, "-c", script], tmp_path / "logs" / "child.log", env={"IOP_X": "x1"}, cwd=tmp_path)
    assert p.popen.wait(30) == 0
    # stdin closed: read() is '' at once; the child leads its own session and process group
    assert p.log_text() == f"x1 {tmp_path} '' True\nto stderr\n"
    assert p.argv == [PY, "-c", script] and p.log_path == tmp_path / "logs" / "child.log"


def test_append_keeps_the_log_of_an_earlier_run(tmp_path):
    log = tmp_path / "p.log"
    for word, append in (("one", False), ("two", True)):
        assert start("p", [PY, "-c", f"print({word!r})"], log, append=append).popen.wait(30) == 0
    assert log.read_text() == "one\ntwo\n"
    assert start("p", [PY, "-c", "print('three')"], log).popen.wait(30) == 0
    assert log.read_text() == "three\n"


def test_output_and_tail_show_the_end_of_the_log(tmp_path):
    p = start("p", [PY, "-c", "for i in range(3000): print(f'line {i}')"], tmp_path / "p.log")
    assert p.popen.wait(30) == 0
    assert p.tail(2) == "line 2998\nline 2999"
    assert len(p.output()) == 4000 and p.output().endswith("line 2999\n")
    assert p.log_text().startswith("line 0\n")


def test_wait_for_output_finds_a_line_printed_long_before(tmp_path):
    p = start(
        "p",
        [
            PY,
            "-c",
            "print('listening on 127.0.0.1:1234'); [print('x' * 100) for _ in range(200)]; import time; time.sleep(30)",
        ],
        tmp_path / "p.log",
    )
    try:
        time.sleep(1)
        assert p.wait_for_output(r"listening on (\S+)", 10).group(1) == "127.0.0.1:1234"
    finally:
        p.stop()


def test_wait_for_output_fails_with_the_output_of_a_child_that_exited(tmp_path):
    p = start("quitter", [PY, "-c", "import sys; print('bad flag --x'); sys.exit(3)"], tmp_path / "p.log")
    with pytest.raises(RuntimeError, match=r"quitter exited with code 3:\nbad flag --x"):
        p.wait_for_output("listening", 30)


def test_stop_terminates_the_whole_process_group(tmp_path):
    # A shell that started a grandchild: SIGTERM goes to the group, so the grandchild stops too.
    p = start("sh", ["sh", "-c", "sleep 60 & echo $!; wait"], tmp_path / "p.log")
    grandchild = int(p.wait_for_output(r"(\d+)\n", 10).group(1))
    p.stop()
    assert p.popen.returncode == -signal.SIGTERM
    assert _wait_gone(grandchild)


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path):
    p = start(
        "stubborn",
        [
            PY,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)",
        ],
        tmp_path / "p.log",
    )
    p.wait_for_output("ready", 30)
    t0 = time.monotonic()
    p.stop(timeout=1)
    assert p.popen.returncode == -signal.SIGKILL
    assert 1 <= time.monotonic() - t0 < 10


def test_stop_all_sends_sigterm_to_every_child_before_waiting(tmp_path):
    # Each child needs 2 s after SIGTERM: stopped one after the other, three take 6 s; together, 2 s.
    slow = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (time.sleep(2), sys.exit(0)))\n"
        "print('ready', flush=True)\ntime.sleep(60)\n"
    )
    procs = [start(f"slow{i}", [PY, "-c", slow], tmp_path / f"s{i}.log") for i in range(3)]
    for p in procs:
        p.wait_for_output("ready", 30)
    t0 = time.monotonic()
    stop_all(procs, timeout=10)
    assert [p.popen.returncode for p in procs] == [0, 0, 0]
    assert time.monotonic() - t0 < 5


def test_wait_for_http_takes_any_answer_or_waits_for_the_status_asked():
    server = NotReadyYet(busy=3)
    url = server.url + "/-/ready"
    try:
        assert wait_for_http(url, timeout=10).status_code == 503
        assert wait_for_http(url, timeout=10, status=200).status_code == 200
        assert server.requests == 4  # the first answer, two more 503s, then the 200 waited for
    finally:
        server.close()


def test_wait_for_http_names_the_child_and_the_last_answer_when_it_times_out(tmp_path):
    server = NotReadyYet(busy=10**6)
    p = start("prometheus", ["sleep", "60"], tmp_path / "p.log")
    try:
        with pytest.raises(
            TimeoutError,
            match=r"prometheus was not ready on http://127\.0\.0\.1:\d+/-/ready "
            r"within 1 s \(HTTP 503\)",
        ):
            wait_for_http(server.url + "/-/ready", timeout=1, proc=p, status=200)
        with pytest.raises(
            TimeoutError,
            match=r"the server was not ready on http://127\.0\.0\.1:\d+/ within "
            r"0\.5 s \(ConnectionError: ",
        ):
            wait_for_http(f"http://127.0.0.1:{free_port()}/", timeout=0.5)
    finally:
        p.stop()
        server.close()


def test_wait_for_http_fails_at_once_when_the_child_exits(tmp_path):
    p = start("exporter", [PY, "-c", "import sys; print('address already in use'); sys.exit(2)"], tmp_path / "p.log")
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exporter exited with code 2:\naddress already in use"):
        wait_for_http(f"http://127.0.0.1:{free_port()}/", timeout=30, proc=p)
    assert time.monotonic() - t0 < 10


def test_free_port_never_hands_out_a_port_twice():
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == 200


def test_free_ports_lie_below_the_ephemeral_range_where_connections_cannot_take_them():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(50)]
    assert all(10000 <= p < low for p in ports), ports
    # and each is bindable by the process it is for
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))


PARENT = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    from ioparallax.simulators.process import start
    log = Path(sys.argv[1])
    helped = start("helped", ["sleep", "120"], log / "helped.log")
    plain = subprocess.Popen(["sleep", "120"], start_new_session=True)   # the control: no helper
    print(helped.pid, plain.pid, flush=True)
    time.sleep(120)
""")


def test_a_child_dies_when_the_process_that_started_it_is_killed(tmp_path):
    """SIGKILL leaves the parent no time to stop anything (pytest killed by CI's timeout): the
    kernel's parent-death signal stops the child. A child started without the helper survives,
    which shows the test can tell the two apart."""
    parent = subprocess.Popen(
        [PY, "-c", PARENT, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    plain = 0
    try:
        assert parent.stdout is not None
        helped, plain = (int(x) for x in parent.stdout.readline().split())
        assert not _gone(helped) and not _gone(plain)
        parent.kill()
        parent.wait(10)
        assert _wait_gone(helped), "the child outlived the process that started it"
        time.sleep(0.5)
        assert not _gone(plain)
    finally:
        parent.kill()
        parent.wait(10)
        if plain:
            try:
                os.kill(plain, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_port_shares_of_processes_side_by_side_never_overlap(monkeypatch):
    """`make test` runs the e2e tests (share 1/2) beside the unit tests (share 0/2, in xdist
    workers): every process' ports come from its own slice of the range, so no two hand out one port."""
    from ioparallax.simulators.process import _ephemeral_ports, _share

    ports = range(10000, _ephemeral_ports().start)
    assert len(ports) > 10000, "the kernel's ephemeral range starts too low for port shares"
    seen: dict[int, str] = {}
    for share in ("0/2", "1/2"):
        monkeypatch.setenv("IOPARALLAX_PORT_SHARE", share)
        workers = 4 if share == "0/2" else 1
        for k in range(workers):
            if share == "0/2":
                monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{k}")
                monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
            else:
                monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
                monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
            mine = _share(ports)
            assert len(mine) >= len(ports) // 8 - 1
            for p in mine:
                assert p not in seen, (p, seen[p], share, k)
                seen[p] = f"{share}:{k}"
    monkeypatch.setenv("IOPARALLAX_PORT_SHARE", "2/2")
    with pytest.raises(ValueError, match="IOPARALLAX_PORT_SHARE"):
        _share(ports)
    monkeypatch.setenv("IOPARALLAX_PORT_SHARE", "1/2")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert ports.start + len(ports) // 2 <= free_port() < ports.stop
