"""ioparallax-check: the traps of each tool flagged before the run, exit 1 on a trap, 0 clean,
2 on unreadable input; the same rules as the exporters."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ioparallax.check import cli
from ioparallax.check.diskspd import CommandLineError, parse_command, split_command
from tests.support import venv_tool

FIXTURES = Path(__file__).resolve().parent.parent / "exporters" / "diskspd" / "fixtures"
CLEAN = [
    "diskspd.exe",
    "-b8K",
    "-d300",
    "-W60",
    "-C5",
    "-t4",
    "-o8",
    "-r",
    "-w30",
    "-Sh",
    "-L",
    "-D",
    "-Z10M",
    "D:\\test.dat",
]


def check_cli(argv, capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def traps(out: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in out.splitlines() if line.strip().startswith("TRAP ")}


def unknown(out: str) -> set[str]:
    return {line.split()[2].rstrip(":") for line in out.splitlines() if line.strip().startswith("CANNOT TELL ")}


# ---- DiskSPD command lines


def test_clean_diskspd_command_exits_0(capsys):
    code, out, _ = check_cli(CLEAN, capsys)
    assert code == 0 and traps(out) == set() and "no hygiene trap found" in out


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda a: [x if x != "-Z10M" else "-Z" for x in a], "zero_buffers"),
        (lambda a: [x for x in a if x != "-Z10M"], "default_write_pattern"),
        (lambda a: a[:-1] + ["-c50G", a[-1]], "reads_unwritten_file"),
        (lambda a: [x for x in a if x != "-Sh"], "buffered_io"),
        (lambda a: [x if x != "-Sh" else "-Sw" for x in a], "buffered_io"),  # write-through alone still buffers reads
        (lambda a: [x if x != "-Sh" else "-Sm" for x in a], "buffered_io"),  # memory-mapped I/O
        (lambda a: [x if x != "-W60" else "-W0" for x in a], "no_warmup"),
        (lambda a: [x for x in a if x != "-d300"], "short_runtime"),  # DiskSPD's default -d10
    ],
    ids=["Z", "no-Z", "c", "no-Sh", "Sw-only", "Sm", "W0", "default-d"],
)
def test_each_diskspd_trap_is_flagged_alone(change, problem, capsys):
    code, out, _ = check_cli(change(CLEAN), capsys)
    assert code == 1 and traps(out) == {problem}, out
    assert "docs/runbook.md#ioparallaxdiskspdtargethygiene" in out


def test_working_set_below_cache_needs_the_cache_size(capsys):
    small = CLEAN[:-1] + ["-f8G", CLEAN[-1]]
    assert check_cli(small, capsys)[0] == 0  # the check is off without --cache-size
    code, out, _ = check_cli(["--cache-size", "20GiB"] + small, capsys)
    assert code == 1 and traps(out) == {"working_set_below_cache"}


@pytest.mark.parametrize("flags", [["-Su"], ["-S"], ["-h"], ["/Sh"], ["-Suw"]])
def test_every_way_of_disabling_the_os_cache(flags, capsys):
    argv = [x for x in CLEAN if x != "-Sh"]
    assert check_cli(argv[:-1] + flags + argv[-1:], capsys)[0] == 0


def test_zr_is_fine_and_read_only_tests_ignore_buffers(capsys):
    assert check_cli([x if x != "-Z10M" else "-Zr" for x in CLEAN], capsys)[0] == 0
    read_only = [x for x in CLEAN if x not in ("-Z10M", "-w30")]
    assert check_cli(read_only, capsys)[0] == 0


def test_physical_drive_and_volume_targets_are_not_created(capsys):
    code, out, _ = check_cli(CLEAN[:-1] + ["-c10G", "#1", "E:"], capsys)
    assert code == 0, out


def test_seed_story_command_line_quoted_as_one_argument(capsys):
    code, out, _ = check_cli(["diskspd -c20G -t2 -o16 -b64K -r -w30 -W0 -d30 -L C:\\scratch\\testfile.dat"], capsys)
    assert code == 1
    assert traps(out) == {"default_write_pattern", "reads_unwritten_file", "buffered_io", "no_warmup", "short_runtime"}
    assert "target C:\\scratch\\testfile.dat" in out


def test_sizes_and_blocks():
    c = parse_command(["diskspd", "-b4K", "-c2b", "-f1M", "-B3b", "x.dat"])
    assert (c.block_size, c.create_size, c.max_size, c.base_offset) == (4096, 8192, 2**20, 12288)
    assert split_command('diskspd.exe -b8K "C:\\my files\\t.dat"') == ["diskspd.exe", "-b8K", "C:\\my files\\t.dat"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["diskspd", "-b8K"], "at least one target"),
        (["diskspd", "-w101", "x"], "out of range"),
        (["diskspd", "-Sq", "x"], "unrecognized option provided to -S"),
        (["diskspd", "-Z0", "x"], "invalid size"),
        (["diskspd", "-bfoo", "x"], "not a size"),
    ],
)
def test_command_lines_diskspd_refuses_exit_2(argv, words, capsys):
    with pytest.raises(CommandLineError, match=words):
        parse_command(argv)
    code, _, err = check_cli(argv, capsys)
    assert code == 2 and words in err and "Traceback" not in err


# ---- DiskSPD files


def test_diskspd_result_file_says_cannot_tell_for_a_sequential_pattern(capsys):
    code, out, _ = check_cli([str(FIXTURES / "vm-seed-default-pattern.xml")], capsys)
    assert code == 1
    assert unknown(out) == {"default_write_pattern"}
    assert "default_write_pattern" not in traps(out)
    code, out, _ = check_cli([str(FIXTURES / "vm-oltp-sh-z10m-utf16.xml")], capsys)
    assert code == 0


def test_diskspd_x_profile_file(tmp_path, capsys):
    text = (FIXTURES / "vm-two-targets-same-disk.xml").read_bytes().decode("utf-8-sig")
    profile = text[text.index("<Profile>") : text.index("</Profile>") + len("</Profile>")]
    f = tmp_path / "sql.xml"
    f.write_text('<?xml version="1.0"?>\n' + profile)
    assert check_cli([str(f)], capsys)[0] == 0
    f.write_text(profile.replace("<Warmup>60</Warmup>", "<Warmup>0</Warmup>"))
    code, out, _ = check_cli([str(f)], capsys)
    assert code == 1 and out.count("TRAP no_warmup") == 2  # both targets of the profile


def test_x_profile_on_the_command_line_points_to_the_profile(capsys):
    code, _, err = check_cli(["diskspd", "-Xsql.xml", "#1"], capsys)
    assert code == 2 and "ioparallax-check sql.xml" in err


def test_command_line_in_a_script_file(tmp_path, capsys):
    f = tmp_path / "run.cmd"
    f.write_text("diskspd.exe -c10G -b8K -d60 -Sh -r C:\\t.dat\r\n")
    code, out, _ = check_cli([str(f)], capsys)
    assert code == 1 and traps(out) == {"reads_unwritten_file"}
    f.write_bytes("\ufeffdiskspd -b8K -d60 -Sh -r C:\\t.dat\r\n".encode("utf-16-le"))  # PowerShell's Out-File
    assert check_cli([str(f)], capsys)[0] == 0


# ---- fio job files

JOB = """\
; a PoC job
[global]
ioengine=libaio
direct=1
size=100g
runtime=600
time_based
[oltp]
rw=randrw
bs=8k
iodepth=32
"""


def test_clean_fio_job_file_exits_0(tmp_path, capsys):
    f = tmp_path / "oltp.fio"
    f.write_text(JOB)
    code, out, _ = check_cli([str(f), "--cache-size", "20GiB"], capsys)
    assert code == 0 and "job [oltp]" not in out


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda j: j + "zero_buffers\n", "zero_buffers"),  # a bare flag counts in a job file
        (lambda j: j + "buffer_compress_percentage=50\nrefill_buffers=1\n", "compressible_without_pattern"),
        (lambda j: j + "buffer_compress_percentage=50\nbuffer_pattern=0xdeadbeef\n", "compressible_without_refill"),
        (lambda j: j.replace("direct=1\n", ""), "buffered_io"),
        (lambda j: j + "gtod_reduce=1\n", "gtod_reduce"),
        (lambda j: j.replace("size=100g", "size=4g"), "working_set_below_cache"),
        (lambda j: j.replace("runtime=600", "runtime=20"), "short_runtime"),
    ],
)
def test_each_fio_trap_is_flagged(change, problem, tmp_path, capsys):
    f = tmp_path / "job.fio"
    f.write_text(change(JOB))
    code, out, _ = check_cli([str(f), "--cache-size", "20GiB"], capsys)
    assert code == 1 and traps(out) == {problem}, out
    assert "docs/runbook.md#ioparallaxfiojobhygiene" in out


def test_fio_command_line(tmp_path, capsys):
    argv = ["fio", "--direct=1", "--size=100g", "--runtime=600", "--time_based", "--name=a", "--rw=randread"]
    assert check_cli(argv, capsys)[0] == 0
    code, out, _ = check_cli(argv + ["--name=b", "--rw=write", "--zero_buffers", "--output=x.json"], capsys)
    assert code == 1 and traps(out) == {"zero_buffers"} and "job [b]" in out and "job [a]" not in out
    f = tmp_path / "j.fio"
    f.write_text("[c]\nrw=read\nruntime=5\n")
    code, out, _ = check_cli(["fio", "--direct=1", str(f)], capsys)
    assert code == 1 and traps(out) == {"short_runtime"}


def test_global_after_a_job_applies_to_later_jobs_only(tmp_path, capsys):
    f = tmp_path / "two.fio"
    f.write_text("[a]\nrw=read\nruntime=600\n[global]\ndirect=1\n[b]\nrw=read\nruntime=600\n")
    code, out, _ = check_cli([str(f)], capsys)
    assert code == 1 and "job [a]" in out and "job [b]" not in out


# ---- input that cannot be checked, the extension point, the console script


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"\x00\x01garbage", "not recognised"),
        (b"rw=randread\n[job]\n", "before any [section]"),
        (b"[global]\ndirect=1\n", "no job to check"),
        (b"<Results><System/><Profile><TimeSpans>", "ends before </Results>"),
    ],
)
def test_unreadable_input_exits_2(content, words, tmp_path, capsys):
    f = tmp_path / "in.txt"
    f.write_bytes(content)
    code, _, err = check_cli([str(f)], capsys)
    assert code == 2 and words in err, err


def test_missing_file_exits_2(capsys):
    code, _, err = check_cli(["/nonexistent/job.fio"], capsys)
    assert code == 2 and "/nonexistent/job.fio" in err


def test_a_new_tool_joins_through_the_list(tmp_path, capsys, monkeypatch):
    def sniff(path, head):
        return head.startswith(b"sd=")

    def check_file(path, data, o):
        bad = b"openflags=o_direct" not in data
        return [cli.Finding("sd1", "buffered_io", cli.TRAP, "no openflags=o_direct")] if bad else []

    monkeypatch.setattr(cli, "TOOLS", [*cli.TOOLS, cli.Tool("vdbench", "ioparallaxvdbenchhygiene", sniff, check_file)])
    f = tmp_path / "parmfile"
    f.write_text("sd=sd1,lun=/dev/sdb\n")
    code, out, _ = check_cli([str(f)], capsys)
    assert code == 1 and "vdbench" in out and "#ioparallaxvdbenchhygiene" in out


def test_console_script():
    out = subprocess.run(
        [venv_tool("ioparallax-check"), "diskspd", "-Z", "-w100", "-Sh", "-d120", "-W10", "x.dat"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "TRAP zero_buffers" in out.stdout
    out = subprocess.run([venv_tool("ioparallax-check"), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "diskspd" in out.stdout
