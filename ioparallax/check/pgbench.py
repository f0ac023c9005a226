"""pgbench command lines as hygiene input, judged by pgbench-exporter's own rules
(ioparallax.exporters.pgbench.hygiene).

pgbench reads its options with getopt_long: short options take their value attached (``-c10``)
or as the next word (``-c 10``), flags may be grouped (``-nr``), long options take ``=value`` or
the next word. The database name (the last word without a dash) is not an option. Both the
initialisation (``pgbench -i -s 100``: the scale) and the run (``pgbench -c 10 -T 600 -P 5``)
are checked; the run's scale is the ``-s`` given to it, which pgbench itself uses only for custom
scripts: without one, the database size cannot be told from the run's command line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ioparallax.exporters.pgbench.hygiene import RunFacts

#: Short options that take a value (pgbench.c's getopt string).
_SHORT_WITH_VALUE = set("bcDfFhIjLMpPRstTU")
#: Short options that are flags.
_SHORT_FLAGS = set("CdEilnNqrSv")
#: Long options that take a value (``--name value`` or ``--name=value``).
_LONG_WITH_VALUE = {
    "builtin",
    "client",
    "define",
    "file",
    "fillfactor",
    "host",
    "init-steps",
    "jobs",
    "latency-limit",
    "protocol",
    "port",
    "progress",
    "rate",
    "scale",
    "transactions",
    "time",
    "username",
    "aggregate-interval",
    "sampling-rate",
    "max-tries",
    "log-prefix",
    "random-seed",
    "partitions",
    "partition-method",
    "tablespace",
    "index-tablespace",
}
_LONG_TO_SHORT = {
    "client": "c",
    "jobs": "j",
    "time": "T",
    "transactions": "t",
    "progress": "P",
    "scale": "s",
    "connect": "C",
    "initialize": "i",
    "rate": "R",
}

PGBENCH = re.compile(r"(^|[\\/])pgbench(\.exe)?$", re.IGNORECASE)


class CommandLineError(ValueError):
    """Not a pgbench command line pgbench would accept (the message says why)."""


@dataclass
class Command:
    options: dict[str, str] = field(default_factory=dict)  # short letter (or long name) -> value ("" for flags)
    database: str | None = None

    @property
    def initialize(self) -> bool:
        return "i" in self.options


def parse_command(argv: list[str]) -> Command:
    """The options of ``pgbench ...`` (argv[0] is pgbench)."""
    cmd = Command()
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            rest = args[i:]
            cmd.database = rest[0] if rest else cmd.database
            break
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if name in _LONG_WITH_VALUE and not eq:
                if i >= len(args):
                    raise CommandLineError(f"--{name} needs a value")
                value = args[i]
                i += 1
            cmd.options[_LONG_TO_SHORT.get(name, name)] = value
        elif a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                letter = a[j]
                if letter in _SHORT_WITH_VALUE:
                    value = a[j + 1 :]
                    if not value:
                        if i >= len(args):
                            raise CommandLineError(f"-{letter} needs a value")
                        value = args[i]
                        i += 1
                    cmd.options[letter] = value
                    break
                if letter not in _SHORT_FLAGS:
                    raise CommandLineError(f"-{letter}: not a pgbench option")
                cmd.options[letter] = ""
                j += 1
        else:
            cmd.database = a
    return cmd


def _int(cmd: Command, letter: str, what: str) -> int | None:
    raw = cmd.options.get(letter)
    if raw is None:
        return None
    if not raw.isdigit():
        raise CommandLineError(f"-{letter} {raw!r}: {what} must be a whole number")
    return int(raw)


def facts(cmd: Command) -> RunFacts:
    """What the command asks for, for the hygiene rules. An initialisation (-i) runs no
    benchmark: only its scale is judged."""
    scale = _int(cmd, "s", "the scale factor")
    if cmd.initialize:
        return RunFacts(scale=scale if scale is not None else 1, progress_known=False)
    duration = None
    if "T" in cmd.options:
        raw = cmd.options["T"]
        if not raw.isdigit():
            raise CommandLineError(f"-T {raw!r}: the duration must be a whole number of seconds")
        duration = float(raw)
    progress = None
    if "P" in cmd.options:
        raw = cmd.options["P"] or "1"
        if not raw.isdigit():
            raise CommandLineError(f"-P {raw!r}: the progress interval must be a number of seconds")
        progress = float(raw)
    transactions = _int(cmd, "t", "the transactions per client")
    if duration is None and transactions is None:
        transactions = 10  # pgbench's default: 10 transactions per client
    return RunFacts(
        scale=scale,
        clients=_int(cmd, "c", "the number of clients") or 1,
        duration_s=duration,
        transactions_per_client=transactions,
        progress_s=progress,
        reconnect="C" in cmd.options,
    )


def looks_like_command_file(text: str) -> bool:
    """A file holding a pgbench command line (a shell script line)."""
    first = text.strip().split(None, 1)[0] if text.strip() else ""
    return bool(PGBENCH.search(first.strip("\"'")))
