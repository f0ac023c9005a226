"""ioparallax-check against hostile input (issue 25, round three; docs/hostile-input.md): every
case is one line and exit 2 (or a clean report), at once, never a traceback, never a hang, and
names from the input never reach the terminal as control sequences."""

from __future__ import annotations

import os
import threading

import pytest

from ioparallax.check import cli

OK = ["diskspd.exe", "-b8K", "-d300", "-W60", "-C5", "-t4", "-o8", "-r", "-w30", "-Sh", "-L", "-D", "-Z10M"]


def run(argv, capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out, out.err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["diskspd", "-Z" + "9" * 5000, "x"], "5000-digit size is out of range"),  # was a ValueError traceback
        (["diskspd", "-b" + "9" * 400 + "K", "x"], "400-digit size is out of range"),  # was accepted
        (["diskspd", "-b99999999999999999999G", "x"], "out of range (64 bits)"),
        (["diskspd", "-c" + "9" * 30 + "T", "x"], "30-digit size is out of range"),
        (["diskspd", "-t" + "9" * 30, "x"], "30-digit number is out of range"),
        (["diskspd", "-b８K", "x"], "is not a size"),  # full-width digits: was read as 8K
        (["diskspd", "-t²", "x"], "is not a number"),  # '²'.isdigit() is true, int('²') raised
        (["diskspd", "-b1_0K", "x"], "is not a size"),
        (["diskspd", "-Z-5", "x"], "is not a size"),
        (["diskspd", "-bnan", "x"], "is not a size"),
        (['diskspd -b8K -d60 "unterminated x'], "no closing quotation"),  # was a ValueError traceback
    ],
)
def test_malformed_values_exit_2_with_one_short_line(argv, words, capsys):
    code, _, err = run(argv, capsys)
    assert code == 2 and words in err, err
    assert len(err.strip().splitlines()) == 1 and len(err) < 300, err[:300]


def test_a_huge_command_line_is_read_and_errors_quote_its_start(capsys):
    code, _, err = run(["diskspd", "-b8K", "-Z" + "x" * 5_000_000, "t.dat"], capsys)
    assert code == 2 and "is not a size" in err and len(err) < 300
    code, out, _ = run(OK + ["-L"] * 100_000 + ["t.dat"], capsys)
    assert code == 0 and "no hygiene trap found" in out


@pytest.mark.parametrize("kind", ["fifo", "dev", "dir", "symlink-to-fifo"])
def test_a_file_that_is_not_regular_exits_2_at_once(kind, tmp_path, capsys):
    path = tmp_path / "job.fio"
    if kind == "fifo":
        os.mkfifo(path)  # open() blocked for ever waiting for a writer
    elif kind == "dev":
        path = "/dev/zero"  # was read to the 64 MiB cap
    elif kind == "dir":
        path.mkdir()
    else:
        os.mkfifo(tmp_path / "f")
        os.symlink(tmp_path / "f", path)
    result: list = []
    t = threading.Thread(target=lambda: result.append(cli.main([str(path)])), daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "ioparallax-check hung"
    err = capsys.readouterr().err
    assert result == [2] and "not a regular file" in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "target, shown",
    [
        ("x\x1b[31mred", "x\\x1b[31mred"),  # an ESC sequence would recolour the terminal
        ("a\nTRAP forged: line", "a\\x0aTRAP forged: line"),
        ("x\udcff", "x\\xff"),  # a name that is not UTF-8 (argv's surrogate escape)
        ("x\x9b31m", "x\\x9b31m"),  # C1 CSI
    ],
)
def test_names_from_the_input_are_shown_escaped(target, shown, capsys):
    code, out, _ = run([a for a in OK if a != "-Z10M"] + [target], capsys)  # one trap: the target is listed
    assert code == 1 and f"  target {shown}" in out.splitlines(), out
    assert not any(c in out for c in "\x1b\x9b")


def test_a_command_file_with_control_characters_and_a_lone_quote(tmp_path, capsys):
    f = tmp_path / "run.cmd"
    f.write_bytes(b'diskspd.exe -b8K -d60 "D:\\t\x1b.dat\r\n')
    code, _, err = run([str(f)], capsys)
    assert code == 2 and "no closing quotation" in err


class CountedSubject(str):
    """A subject that counts how often it is compared with another (str's hash is kept: a dict
    compares only on a hash match)."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        CountedSubject.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_findings_are_grouped_by_subject_in_one_pass():
    """Each finding was compared with every subject: 40,000 fio job sections took 51 s. With 2,000
    subjects of two findings each, one pass compares at most once per finding (4,000); matching
    per subject compared 2,000 x 4,000 = 8 million times. Counted, not timed."""
    findings = [
        cli.Finding(CountedSubject(f"job{i}"), problem, cli.TRAP, "detail")
        for i in range(2000)
        for problem in ("no direct=1", "no ramp_time")
    ]
    tool = cli._tool("fio")
    CountedSubject.comparisons = 0
    text = cli.report(tool, "fio jobs.fio", findings, "docs/runbook.md")
    assert CountedSubject.comparisons <= len(findings)
    lines = text.splitlines()
    # every subject once, in order, its two findings under it
    assert lines[1:7] == [
        "  job0",
        "    TRAP no direct=1: detail",
        "    TRAP no ramp_time: detail",
        "  job1",
        "    TRAP no direct=1: detail",
        "    TRAP no ramp_time: detail",
    ]
    assert sum(1 for line in lines if line.startswith("  job")) == 2000
    assert lines[-1].startswith("4000 trap(s), 0 cannot tell.")
