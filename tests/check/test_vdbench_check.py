"""ioparallax-check on vdbench parameter files: the traps flagged before the run (exit 1), a
clean file passes (exit 0), what a parmfile cannot tell is said, garbage is refused (exit 2)."""

from __future__ import annotations

import subprocess

from tests.exporters.vdbench.test_vdbench_reader import MODERN, MULTI
from tests.support import venv_tool


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([venv_tool("ioparallax-check"), *args], capture_output=True, text=True, timeout=60)


def test_traps_of_a_parmfile_are_flagged_before_the_run(tmp_path):
    parm = tmp_path / "oltp.parm"
    parm.write_text((MODERN / "parmfile.html").read_text())
    out = check(str(parm), "--cache-size", "8GiB")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"vdbench {parm}:"
    assert "  sd=sd1" in lines and "  sd=sd2" in lines
    assert any(ln.startswith("    TRAP buffered_io: lun=/dev/sdb has no openflags=o_direct") for ln in lines)
    assert "    TRAP working_set_below_cache: touches 2 GiB, less than the 8 GiB cache" in lines
    assert any(ln.startswith("    TRAP compratio_requested:") for ln in lines)
    assert any(ln.startswith("    TRAP dedupratio_requested:") for ln in lines)
    assert lines[-1].startswith("5 trap(s), 0 cannot tell. Runbook: docs/runbook.md#ioparallaxvdbenchrunhygiene")


def test_short_run_and_clean_file(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("sd=sd1,lun=/dev/sdb,openflags=o_direct,size=100g\nwd=wd1,sd=sd1\nrd=rd1,wd=wd1,elapsed=30\n")
    out = check(str(short))
    assert out.returncode == 1
    assert "    TRAP short_runtime: elapsed=30s is under 3 scrape intervals (15s)" in out.stdout
    assert check(str(short), "--scrape-interval", "5s").returncode == 0  # 30 s >= 3 x 5 s
    clean = tmp_path / "clean.vdb"
    clean.write_text(
        "sd=sd1,lun=/dev/sdb,openflags=o_direct,size=100g\n"
        "wd=wd1,sd=sd1,xfersize=8k,rdpct=70\nrd=rd1,wd=wd1,iorate=max,elapsed=600,interval=5\n"
    )
    out = check(str(clean), "--cache-size", "8GiB")
    assert out.returncode == 0 and "no hygiene trap found" in out.stdout


def test_what_a_parmfile_cannot_tell_is_said():
    out = check(str(MULTI / "parmfile.html"), "--cache-size", "8GiB")
    assert out.returncode == 0  # o_direct, no data reduction: no trap
    assert out.stdout.count("CANNOT TELL working_set_below_cache: no size= on its sd= lines") == 3


def test_not_a_parmfile_is_refused(tmp_path):
    bad = tmp_path / "x.parm"
    bad.write_text("sd=sd1,lun=/dev/sdb\nwd=wd1,sd=sd1\n")
    out = check(str(bad))
    assert out.returncode == 2
    assert f"ioparallax-check: {bad}: no rd= line" in out.stderr
