"""DiskSPD command lines (and ``-X`` profile / ``-Rxml`` result files) as hygiene specs.

The command line is read as microsoft/diskspd ``CmdLineParser.cpp`` reads it: switches start with
``-`` or ``/`` and carry their value attached (``-b8K``, ``-o32``, ``-Z10M``); the first argument
that is not a switch starts the targets. Sizes take ``K``/``M``/``G``/``T`` (powers of 1024) or
``b`` (blocks of ``-b``). Defaults are DiskSPD's: ``-b64K -d10 -W5 -C0 -o2 -t1 -w0``, sequential,
OS cache on, the repeating ``sequential`` write buffer.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ioparallax.exporters.diskspd.hygiene import TargetSpec, spec_from_result, working_set
from ioparallax.exporters.diskspd.parse import NotDiskspd, TargetProfile, TargetResult, parse_bytes, targets_of


class CommandLineError(ValueError):
    """A DiskSPD command line that DiskSPD itself would refuse (the message names the switch)."""


_SIZE = re.compile(r"([0-9]+)([KMGTB]?)", re.IGNORECASE | re.ASCII)
_POW = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}
#: DiskSPD holds sizes and counts in 64-bit integers; more digits than this cannot be one.
_MAX_DIGITS = 20


def _cut(text: str) -> str:
    """A value quoted in an error: its start only (a command line can be megabytes long)."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _size(text: str, block: int, switch: str) -> int:
    """ASCII digits only, as DiskSPD reads them (full-width digits, ``1_0`` and ``²`` are not
    numbers to it), and at most 64 bits."""
    switch = switch if len(switch) <= 40 else switch[:40] + "..."
    m = _SIZE.fullmatch(text)
    if not m:
        raise CommandLineError(f"{switch}: {_cut(text)} is not a size (a number with K, M, G, T or b)")
    if len(m.group(1)) > _MAX_DIGITS:
        raise CommandLineError(f"{switch}: a {len(m.group(1))}-digit size is out of range (64 bits)")
    unit = m.group(2).upper()
    value = int(m.group(1)) * (block if unit == "B" else 1024 ** _POW[unit])
    if value >= 2**64:
        raise CommandLineError(f"{switch}: {_cut(text)} is out of range (64 bits)")
    return value


def _int(text: str, switch: str, low: int = 0, high: int | None = None) -> int:
    switch = switch if len(switch) <= 40 else switch[:40] + "..."
    if not re.fullmatch(r"[0-9]+", text, re.ASCII):
        raise CommandLineError(f"{switch}: {_cut(text)} is not a number")
    if len(text) > _MAX_DIGITS:
        raise CommandLineError(f"{switch}: a {len(text)}-digit number is out of range")
    value = int(text)
    if value < low or (high is not None and value > high):
        raise CommandLineError(f"{switch}: {value} is out of range")
    return value


@dataclass
class Command:
    """What a DiskSPD command line asks for."""

    targets: list[str] = field(default_factory=list)
    block_size: int = 65536
    duration_s: float = 10.0
    warmup_s: float = 5.0
    cooldown_s: float = 0.0
    write_ratio: int = 0
    threads_per_file: int = 1
    fixed_threads: int = 0
    request_count: int = 2
    random: bool = False
    create_size: int | None = None
    base_offset: int = 0
    max_size: int = 0
    pattern: str = "sequential"  # sequential (default), zero, random, random_per_io
    os_cache: bool = True
    memory_mapped: bool = False
    xml_profile: str | None = None


def parse_command(argv: list[str]) -> Command:
    """A DiskSPD command line (``argv[0]`` the program, as a shell would split it)."""
    if not argv:
        raise CommandLineError("empty command line")
    args = argv[1:] if re.search(r"diskspd(\.exe)?$", argv[0], re.IGNORECASE) else argv
    c = Command()
    switches = []
    i = 0
    while i < len(args) and args[i][:1] in ("-", "/") and len(args[i]) > 1:
        switches.append(args[i])
        i += 1
    c.targets = args[i:]
    # -b first: "b" size suffixes of the other switches are blocks of it
    for s in switches:
        if s[1] == "b":
            c.block_size = _size(s[2:], 1, s)
    for s in switches:
        opt, val = s[1], s[2:]
        if opt == "c":
            c.create_size = _size(val, c.block_size, s)
        elif opt == "d":
            c.duration_s = float(_int(val, s))
        elif opt == "W":
            c.warmup_s = float(_int(val, s))
        elif opt == "C":
            c.cooldown_s = float(_int(val, s))
        elif opt == "w":
            c.write_ratio = _int(val, s, 0, 100)
        elif opt == "t":
            c.threads_per_file = _int(val, s, 1)
        elif opt == "F":
            c.fixed_threads = _int(val, s, 1)
        elif opt == "o":
            c.request_count = _int(val, s, 1)
        elif opt == "r":
            c.random = True
        elif opt == "s" and not val.startswith("i") and val:
            _size(val, c.block_size, s)
        elif opt == "B":
            c.base_offset = _size(val.split(":")[0], c.block_size, s) if val else 0
        elif opt == "f" and val[:1] not in ("r", "s", "t", ""):
            c.max_size = _size(val, c.block_size, s)
        elif opt == "h":
            c.os_cache = False
        elif opt == "S":
            flags = val or "u"
            if set(flags) - set("bhmruw"):
                raise CommandLineError(f"{s}: unrecognized option provided to -S (b, h, m, r, u, w)")
            if "h" in flags or "u" in flags:
                c.os_cache = False
            if "m" in flags:
                c.memory_mapped = True
        elif opt == "Z":
            if val == "":
                c.pattern = "zero"
            elif val == "r":
                c.pattern = "random_per_io"
            else:
                size = _size(val.split(",")[0], c.block_size, s)
                if size == 0:
                    raise CommandLineError(f"{s}: invalid size passed to -Z")
                c.pattern = "random"
        elif opt == "X":
            c.xml_profile = val
    if not c.targets and c.xml_profile is None:
        raise CommandLineError("need to provide at least one target (a file, #<disk> or <letter>:)")
    return c


def split_command(text: str) -> list[str]:
    """A command line given as one string: Windows paths keep their backslashes; quotes go."""
    try:
        words = shlex.split(text, posix=False)
    except ValueError as exc:  # "No closing quotation"
        raise CommandLineError(f"cannot split the command line: {str(exc).lower()}") from None
    return [a[1:-1] if len(a) > 1 and a[0] == a[-1] and a[0] in "\"'" else a for a in words]


def specs_from_command(c: Command) -> list[TargetSpec]:
    out = []
    for path in c.targets:
        is_file = not (path.startswith("#") or (len(path) == 2 and path[1] == ":"))
        prof = TargetProfile(
            path=path,
            block_size=c.block_size,
            base_file_offset=c.base_offset,
            max_file_size=c.max_size,
            file_size=c.create_size if is_file else None,
        )
        out.append(
            TargetSpec(
                path=path,
                write_ratio=c.write_ratio,
                write_pattern=c.pattern,
                os_cache=c.os_cache or c.memory_mapped,
                warmup_s=c.warmup_s,
                duration_s=c.duration_s,
                working_set_bytes=working_set(prof, None),
                creates_file=c.create_size is not None and is_file,
            )
        )
    return out


def specs_from_xml(data: bytes) -> list[TargetSpec]:
    """A DiskSPD ``-Rxml`` result (``<Results>``) or ``-X`` profile (``<Profile>``, the same
    element a result holds) as specs; the profile's targets, with the result's file sizes."""
    try:
        result = parse_bytes(data)
    except NotDiskspd:
        text = data.decode("utf-8-sig", errors="replace")
        text = re.sub(r"^\s*<\?xml[^>]*\?>", "", text)
        result = parse_bytes(f"<Results><System/>{text}</Results>".encode())
    out = []
    for i, prof in enumerate(result.profiles):
        span = result.spans[i] if i < len(result.spans) else None
        measured = {t.index: t for t in targets_of(prof, span)} if span is not None and span.error is None else {}
        for n, tp in enumerate(prof.targets):
            tr = measured.get(n) or TargetResult(n, tp.path, tp, 0, 0, 0, 0, 0, 0, None, None)
            spec = spec_from_result(prof, tr)
            if spec is not None:
                out.append(spec)
    return out
