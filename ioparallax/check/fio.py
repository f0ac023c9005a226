"""fio job files as hygiene input: the job sections with ``[global]`` merged in, judged by
fio-exporter's own rules (ioparallax.exporters.fio.hygiene).

Unlike fio's JSON, a job file shows bare flags (``zero_buffers``, ``time_based``): a bare flag is
taken as set (``1``). ``include`` lines and ``${VAR}`` substitutions are not followed.
"""

from __future__ import annotations

import re

from ioparallax.exporters.fio.hygiene import HygieneConfig, find_problems
from ioparallax.exporters.fio.parse import JobRecord

_SECTION = re.compile(r"^\[([^\]]+)\]\s*$")


class JobFileError(ValueError):
    """Not a fio job file (the message names the line)."""


def parse_job_file(text: str) -> list[JobRecord]:
    """The jobs of a fio job file, global options merged in (the job's own win), in file order."""
    sections: list[tuple[str, dict[str, str]]] = []
    current: dict[str, str] | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        m = _SECTION.match(line)
        if m:
            current = {}
            sections.append((m.group(1).strip(), current))
            continue
        if current is None:
            raise JobFileError(f"line {n}: an option before any [section]: {line[:60]!r}")
        key, sep, value = line.partition("=")
        current[key.strip()] = value.strip() if sep else "1"
    if not sections:
        raise JobFileError("no [section]: not a fio job file")
    global_opts: dict[str, str] = {}
    jobs: list[JobRecord] = []
    for name, opts in sections:
        if name == "global":
            global_opts.update(opts)  # a later [global] applies to the jobs after it
            continue
        merged = {**global_opts, **opts}
        jobs.append(JobRecord(jobid=len(jobs), name=name, options=merged, job_options=dict(opts), directions={}))
    if not jobs:
        raise JobFileError("only [global] sections: no job to check")
    return jobs


def parse_command(argv: list[str]) -> list[JobRecord]:
    """The jobs of a fio command line (``fio --name=a --rw=read ... --name=b ...``): options before
    the first ``--name`` are global; each ``--name`` starts a job; a bare ``--flag`` is set. A job
    file named on the command line is read as well."""
    text = []
    section = "global"
    lines: list[str] = [f"[{section}]"]
    for arg in argv[1:]:
        if arg.startswith("--"):
            key, sep, value = arg[2:].partition("=")
            if key == "name":
                lines.append(f"[{value or 'job'}]")
                continue
            if key in ("output", "output-format", "status-interval", "section", "client", "server"):
                continue  # fio's own switches, not job options
            lines.append(f"{key}={value}" if sep else key)
        elif not arg.startswith("-"):
            try:
                with open(arg, encoding="utf-8", errors="replace") as fh:
                    text.append(fh.read())
            except OSError as exc:
                raise JobFileError(f"{arg}: {exc.strerror or exc}") from None
    jobs_text = "\n".join(lines) + "\n" + "\n".join(text)
    return parse_job_file(jobs_text)


def looks_like_job_file(text: str) -> bool:
    return any(_SECTION.match(line.strip()) for line in text.splitlines()[:200])


def check_jobs(jobs: list[JobRecord], config: HygieneConfig) -> list[tuple[str, list[str]]]:
    """(job name, problems) per job."""
    return [(job.name, find_problems(job, config, finished=False)) for job in jobs]


#: One line per fio problem for the check's output (docs/hygiene.md has the full text).
REASONS = {
    "zero_buffers": "zero_buffers writes all-zero blocks: the storage stores metadata only (zero suppression)",
    "compressible_without_pattern": "buffer_compress_percentage without buffer_pattern pads buffers with NUL bytes: zero suppression, not compression",
    "compressible_without_refill": "buffer_compress_percentage without refill_buffers reuses the same buffer: data reduction overstated",
    "buffered_io": "no direct=1: buffered I/O, the guest's page cache answers",
    "gtod_reduce": "gtod_reduce=1: no latency data at all",
    "working_set_below_cache": "the job's size is smaller than the storage cache: reads come from memory",
    "short_runtime": "runtime under 3 scrape intervals: the other views see a couple of samples at most",
}
