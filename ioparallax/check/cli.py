"""ioparallax-check: a benchmark's hygiene findings BEFORE the run, from the rules the exporters use.

    ioparallax-check job.fio                      # a fio job file
    ioparallax-check fio --name=a --rw=randread --size=4g   # a fio command line
    ioparallax-check diskspd -b8K -d60 -Sh D:\\t.dat  # a DiskSPD command line (as typed)
    ioparallax-check "diskspd.exe -b8K -d60 D:\\t.dat" # ... or quoted as one argument
    ioparallax-check profile.xml                  # a DiskSPD -X profile or -Rxml result
    ioparallax-check pgbench -c 10 -T 600 -P 5 db # a pgbench command line (or pgbench -i -s 100 db)

Exit status: 0 clean (findings that cannot be told are printed, not failed), 1 at least one trap,
2 input that cannot be read or is not what it claims to be.

Tools are entries of :data:`TOOLS`: a name, how to recognise a file of it, and how to check a
file or a command line. A tool is added by appending a :class:`Tool` (vdbench parmfiles: one
module with ``sniff`` and ``check_file``, one line in :data:`TOOLS`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ioparallax.check import (
    diskspd as diskspd_check,
    fio as fio_check,
    pgbench as pgbench_check,
    vdbench as vdbench_check,
)
from ioparallax.exporters.common.exposition import printable
from ioparallax.exporters.common.hygiene import CANNOT_TELL, TRAP
from ioparallax.exporters.common.watchdir import open_regular
from ioparallax.exporters.diskspd.hygiene import find_problems
from ioparallax.exporters.diskspd.parse import DiskspdError, decode
from ioparallax.exporters.fio.parse import JobRecord
from ioparallax.exporters.pgbench import hygiene as pgbench_hygiene
from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.units import parse_bytes, parse_duration
from ioparallax.version import add_version_arg

#: Where each finding's runbook lives: ``%s`` takes the anchor (as the mixin's ``runbook_url``).
DEFAULT_RUNBOOK = "docs/runbook.md#%s"

#: Largest input read (job files and command lines are small; DiskSPD XML results are bounded by the reader).
MAX_INPUT_BYTES = 64 * 1024 * 1024


class InputError(Exception):
    """Input that cannot be read or checked (exit 2)."""


#: The checks' settings: pgbench's, which hold the database server's (for pgbench's checks) on top
#: of the storage cache size and scrape interval every tool's checks read (common HygieneConfig).
Options = pgbench_hygiene.HygieneConfig


@dataclass(frozen=True)
class Finding:
    subject: str  # the job, target or workload the finding is about
    problem: str
    verdict: str  # TRAP or CANNOT_TELL
    detail: str


@dataclass(frozen=True)
class Tool:
    name: str
    runbook_anchor: str  # the runbook section of the tool's hygiene alert
    sniff: Callable[[str, bytes], bool]  # (path, first bytes) -> is this a file of the tool?
    check_file: Callable[[str, bytes, Options], list[Finding]] | None
    check_command: Callable[[list[str], Options], list[Finding]] | None = None
    is_command: Callable[[str], bool] = lambda _argv0: False


# ---- fio


def _fio_sniff(path: str, head: bytes) -> bool:
    text = head.decode("utf-8", errors="replace")
    return path.endswith((".fio", ".ini", ".job")) or fio_check.looks_like_job_file(text)


def _fio_file(path: str, data: bytes, o: Options) -> list[Finding]:
    try:
        jobs = fio_check.parse_job_file(data.decode("utf-8", errors="replace"))
    except fio_check.JobFileError as exc:
        raise InputError(f"{path}: {exc}") from None
    return _fio_findings(jobs, o)


def _fio_command(argv: list[str], o: Options) -> list[Finding]:
    try:
        jobs = fio_check.parse_command(argv)
    except fio_check.JobFileError as exc:
        raise InputError(f"fio command line: {exc}") from None
    return _fio_findings(jobs, o)


def _fio_findings(jobs: list[JobRecord], o: Options) -> list[Finding]:
    return [
        Finding(f"job [{name}]", p, TRAP, fio_check.REASONS.get(p, p))
        for name, problems in fio_check.check_jobs(jobs, o)
        for p in problems
    ]


# ---- DiskSPD

_DISKSPD = re.compile(r"(^|[\\/])diskspd(\.exe)?$", re.IGNORECASE)


def _diskspd_findings(specs, o: Options) -> list[Finding]:
    return [
        Finding(f"target {spec.path}", f.problem, f.verdict, f.detail) for spec in specs for f in find_problems(spec, o)
    ]


def _diskspd_command(argv: list[str], o: Options) -> list[Finding]:
    try:
        command = diskspd_check.parse_command(argv)
    except diskspd_check.CommandLineError as exc:
        raise InputError(f"DiskSPD command line: {exc}") from None
    if command.xml_profile is not None:  # the profile, not the command line, says what runs
        raise InputError(
            f"DiskSPD command line: -X{command.xml_profile}: check the profile file itself (ioparallax-check {command.xml_profile})"
        )
    return _diskspd_findings(diskspd_check.specs_from_command(command), o)


def _split(line: str) -> list[str]:
    try:
        return diskspd_check.split_command(line)
    except diskspd_check.CommandLineError as exc:
        raise InputError(f"DiskSPD command line: {exc}") from None


def _diskspd_sniff(path: str, head: bytes) -> bool:
    try:
        text = decode(head)[0]
    except DiskspdError:
        return False
    return (
        "<Profile" in text
        or "<Results" in text
        or bool(_DISKSPD.search(text.split(None, 1)[0] if text.split() else ""))
    )


def _diskspd_file(path: str, data: bytes, o: Options) -> list[Finding]:
    try:
        text = decode(data)[0].strip()
    except DiskspdError as exc:
        raise InputError(f"{path}: {exc}") from None
    first = text.split(None, 1)[0] if text else ""
    if _DISKSPD.search(first.strip("\"'")):
        # a file holding a DiskSPD command line (a .cmd or .ps1 line)
        return _diskspd_command(_split(text.splitlines()[0]), o)
    try:
        return _diskspd_findings(diskspd_check.specs_from_xml(data), o)
    except DiskspdError as exc:
        raise InputError(f"{path}: {exc}") from None


# ---- vdbench


def _vdbench_sniff(path: str, head: bytes) -> bool:
    return vdbench_check.looks_like_parmfile(path, head.decode("utf-8", errors="replace"))


def _vdbench_file(path: str, data: bytes, o: Options) -> list[Finding]:
    try:
        pf = vdbench_check.parse(data.decode("utf-8", errors="replace"))
    except vdbench_check.ParmfileError as exc:
        raise InputError(f"{path}: {exc}") from None
    return [
        Finding(where, problem, TRAP if trap else CANNOT_TELL, detail)
        for where, problem, trap, detail in vdbench_check.findings(pf, o)
    ]


# ---- pgbench


def _pgbench_command(argv: list[str], o: Options) -> list[Finding]:
    try:
        command = pgbench_check.parse_command(argv)
        facts = pgbench_check.facts(command)
    except pgbench_check.CommandLineError as exc:
        raise InputError(f"pgbench command line: {exc}") from None
    subject = f"initialisation (scale {facts.scale})" if command.initialize else "run"
    if command.database:
        subject += f" of database {command.database}"
    return [Finding(subject, f.problem, f.verdict, f.detail) for f in pgbench_hygiene.find_problems(facts, o)]


def _pgbench_sniff(path: str, head: bytes) -> bool:
    return pgbench_check.looks_like_command_file(head.decode("utf-8", errors="replace"))


def _pgbench_file(path: str, data: bytes, o: Options) -> list[Finding]:
    text = data.decode("utf-8", errors="replace").strip()
    return _pgbench_command(_split(text.splitlines()[0]), o)


TOOLS: list[Tool] = [
    Tool(
        "diskspd",
        "ioparallaxdiskspdtargethygiene",
        _diskspd_sniff,
        _diskspd_file,
        _diskspd_command,
        lambda argv0: bool(_DISKSPD.search(argv0.strip("\"'"))),
    ),
    Tool(
        "fio",
        "ioparallaxfiojobhygiene",
        _fio_sniff,
        _fio_file,
        _fio_command,
        lambda argv0: bool(re.search(r"(^|/)fio$", argv0)),
    ),
    Tool("vdbench", "ioparallaxvdbenchrunhygiene", _vdbench_sniff, _vdbench_file),
    Tool(
        "pgbench",
        "ioparallaxpgbenchrunhygiene",
        _pgbench_sniff,
        _pgbench_file,
        _pgbench_command,
        lambda argv0: bool(pgbench_check.PGBENCH.search(argv0.strip("\"'"))),
    ),
]


def _tool(name: str) -> Tool:
    for t in TOOLS:
        if t.name == name:
            return t
    raise InputError(f"unknown tool {name!r} (known: {', '.join(t.name for t in TOOLS)})")


def check(inputs: list[str], o: Options, tool_name: str | None = None) -> tuple[Tool, str, list[Finding]]:
    """(tool, what was checked, findings) for a file path or a command line; InputError says why not."""
    if not inputs:
        raise InputError(
            "nothing to check: give a fio job file, a DiskSPD command line, a vdbench parmfile or a pgbench command line"
        )
    argv = inputs
    if len(inputs) == 1 and not os.path.exists(inputs[0]) and " " in inputs[0].strip():
        argv = _split(inputs[0])  # a command line quoted as one argument
    command_tools = [t for t in TOOLS if t.check_command is not None and t.is_command(argv[0])]
    if tool_name is not None:
        command_tools = [t for t in command_tools if t.name == tool_name]
    if command_tools or (tool_name is not None and not os.path.exists(argv[0])):
        tool = command_tools[0] if command_tools else _tool(tool_name or "")
        if tool.check_command is None:
            raise InputError(f"{tool.name}: give a file, not a command line")
        return tool, f"{tool.name} command line", tool.check_command(argv, o)
    if len(inputs) != 1:
        raise InputError(
            f"{inputs[0]}: no such file, and not a command line of a known tool ({', '.join(t.name for t in TOOLS)})"
        )
    path = inputs[0]
    try:
        with open_regular(path) as fh:  # a FIFO blocked open() for ever; a device was read
            data = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: {(exc.strerror or str(exc)).split(';')[0]}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"{path}: larger than {MAX_INPUT_BYTES} bytes: not a job file, command line or result")
    head = data[:65536]
    candidates = [_tool(tool_name)] if tool_name else [t for t in TOOLS if t.sniff(path, head)]
    if not candidates:
        raise InputError(
            f"{path}: not recognised as a fio job file, a DiskSPD command line/profile, a vdbench parmfile or a "
            "pgbench command line (use --tool)"
        )
    tool = candidates[0]
    if tool.check_file is None:
        raise InputError(f"{tool.name}: give a command line, not a file")
    return tool, f"{tool.name} {path}", tool.check_file(path, data, o)


def by_subject(findings: Iterable[Finding]) -> dict[str, list[Finding]]:
    """The findings grouped by subject, subjects in the order they first appear, each one's
    findings in their order: one pass (each finding was compared with every subject, so 40,000
    job sections took 51 s)."""
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.subject, []).append(f)
    return out


def report(tool: Tool, what: str, findings: list[Finding], runbook_url: str) -> str:
    traps = [f for f in findings if f.verdict == TRAP]
    unknown = [f for f in findings if f.verdict == CANNOT_TELL]
    lines = [f"{what}:"]
    for subject, about in by_subject(findings).items():
        lines.append(f"  {subject}")
        for f in about:
            word = "TRAP" if f.verdict == TRAP else "CANNOT TELL"
            lines.append(f"    {word} {f.problem}: {f.detail}")
    if not findings:
        lines.append("  no hygiene trap found")
    anchor = tool.runbook_anchor
    link = runbook_url.replace("%s", anchor) if "%s" in runbook_url else f"{runbook_url}#{anchor}"
    lines.append(f"{len(traps)} trap(s), {len(unknown)} cannot tell. Runbook: {link} (each problem: docs/hygiene.md)")
    return "\n".join(_shown(line) for line in lines)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _shown(line: str) -> str:
    """A report line as a terminal shows it: a target or file name from a hostile command line or
    result (ESC sequences, a newline forging a line, a byte that is not UTF-8) is written escaped."""
    return printable(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ioparallax-check",
        description="Print the benchmark hygiene findings of a fio job file, a DiskSPD command line "
        "(or -X profile / -Rxml result), a vdbench parmfile or a pgbench command line BEFORE the run, "
        "with the runbook link; the same rules the exporters apply to results. Exit status 0 clean, 1 "
        "a trap, 2 unreadable input. Everything from a word 'diskspd', 'diskspd.exe', 'fio' or "
        "'pgbench' on is that tool's command line.",
    )
    p.add_argument("input", nargs="*", help="a file, or a command line (diskspd ...)")
    p.add_argument("--tool", choices=[t.name for t in TOOLS], help="the tool, when it cannot be recognised")
    p.add_argument(
        "--cache-size", metavar="SIZE", help="storage cache size for the working-set check, e.g. 20GiB (default: off)"
    )
    p.add_argument(
        "--scrape-interval",
        metavar="DURATION",
        default="15s",
        help="Prometheus' scrape interval: runs shorter than 3 of these are flagged (default: %(default)s)",
    )
    db = p.add_argument_group("the database server (pgbench)")
    db.add_argument(
        "--shared-buffers", metavar="SIZE", help="its shared_buffers: a database that fits is flagged (default: off)"
    )
    db.add_argument(
        "--memory-size", metavar="SIZE", help="the database VM's RAM: a database that fits is flagged (default: off)"
    )
    db.add_argument(
        "--checkpoint-timeout",
        metavar="DURATION",
        default="5m",
        help="its checkpoint_timeout: shorter runs are flagged (default: %(default)s)",
    )
    db.add_argument(
        "--max-connections",
        metavar="N",
        type=int,
        default=pgbench_hygiene.DEFAULT_MAX_CONNECTIONS,
        help="its max_connections: more clients are flagged (default: %(default)s)",
    )
    p.add_argument(
        "--runbook-url",
        default=DEFAULT_RUNBOOK,
        metavar="URL",
        help="runbook link printed; %%s takes the section anchor (default: %(default)s)",
    )
    add_version_arg(p)
    return p


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # the tool's own command line is not ours to parse: split it off before argparse sees it
    command: list[str] = []
    for i, a in enumerate(argv):
        if any(t.is_command(a) for t in TOOLS):
            argv, command = argv[:i], argv[i:]
            break
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :] + command
    args = build_parser().parse_args(argv)
    try:
        options = Options(
            cache_size_bytes=parse_bytes(args.cache_size) if args.cache_size else None,
            scrape_interval_s=parse_duration(args.scrape_interval),
            shared_buffers_bytes=parse_bytes(args.shared_buffers) if args.shared_buffers else None,
            memory_bytes=parse_bytes(args.memory_size) if args.memory_size else None,
            checkpoint_timeout_s=parse_duration(args.checkpoint_timeout),
            max_connections=args.max_connections,
        )
    except ValueError as exc:
        print(f"ioparallax-check: {exc}", file=sys.stderr)
        return 2
    try:
        tool, what, findings = check(command or args.input, options, args.tool)
    except (InputError, DiskspdError) as exc:
        print(f"ioparallax-check: {exc}", file=sys.stderr)
        return 2
    print(report(tool, what, findings, args.runbook_url))
    return 1 if any(f.verdict == TRAP for f in findings) else 0


if __name__ == "__main__":
    sys.exit(main())
