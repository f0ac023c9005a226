"""How fast and how lean the fio reader and exporter are, each against a baseline in the same run.

Inputs (made at start, in a temp dir):
- a 64-job json+ result from a REAL fio run (64 jobs of 1 s on small files, psync);
- status streams SYNTHESIZED from a real 4-job json+ status record: the record is replicated with
  cumulative values (ios, bytes, runtime, N, bins counts, timestamps) growing record by record,
  written in fio's pretty-printed style (about 117 KB per record).

Parts (``--part``, default all):
- ``reader``: the reader (text -> records) against json.loads of the same bytes and against the
  decoder the reader itself uses (msgspec, 0.5-0.7x json.loads: the true floor), the reader's own
  cost over that decode in calibration units (bench/gate.py), and an incremental read of the last
  appended record against re-reading the whole stream.
- ``recovery``: streams of 5, 10 and 20 MB with an error line (``fio: io_u error ...``) inside
  every record, against clean streams of the same sizes: time ratio error/clean per size, and the
  20 MB/5 MB time ratio (4.0 is linear; the old reader was superlinear: 1.4 s, 4.9 s, 20.9 s).
- ``cpu``: a real fio-exporter process scraped every ``--scrape-interval`` seconds (default 15)
  for ``--seconds`` (default 60) while a status stream grows by one record per second, side by side
  with the same exporter scraped at the same moments on a complete stream that does not grow:
  CPU share of one core (target: under 2 %) and CPU per scrape.
- ``rss``: a real fio-exporter process scraped until its counters settle; its peak RSS (VmHWM),
  the first scrape's time and what it read (its own fio_source_* counters, checked) for a 200 MB
  clean stream it starts late on (it skips to the last records by design), 200 MB of garbage, a
  222 MB single document, and a 200 MB stream appended 50 MB between scrapes (every byte read:
  the case whose RSS can grow with the data), against the same exporter on a 1 MB clean stream
  (target: under 100 MB; and every record of what was read counted).

Each figure is min / median over repeated runs, printed with the load average it ran at and its
target; the bench exits 1 when a target is missed (every part's figures are printed first).
Targets: reader at most 1.5x json.loads and at most 2.5x msgspec's decode of the same bytes
(medians of the paired runs' ratios, for the 64-job result and for the stream), and the reader's
own CPU over msgspec's decode under 0.15 calibration units per MB (pure-Python kernel; measured
0.03-0.05 at load 5-7 on 2 cores); the incremental read at least 100x cheaper than a full re-read; error-line
recovery linear (20 MB / 5 MB under 6x: 4 is linear, the old superlinear reader took 15x); the
growing stream's exporter under 2 % of a core; every input's peak RSS under 100 MB.

Run: .venv/bin/python bench/fio_read.py [--part P]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import msgspec

import gate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ioparallax.exporters.fio.reader import DocumentStream, FileTailer, read_text  # noqa: E402
from ioparallax.simulators.process import free_port, start as start_process, wait_for_http  # noqa: E402


def cpu_time(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def paired(floor, ours, repeat: int) -> tuple[gate.Runs, gate.Runs, gate.Runs]:
    """``floor`` and ``ours`` timed alternately ``repeat`` times (so both see the same load):
    their CPU times and the ratio ours / floor of each pair. Both run in this one thread, so CPU
    time is the figure; wall time would add the time other processes held the core."""
    t_floor, t_ours, ratio = gate.Runs(), gate.Runs(), gate.Runs()
    for _ in range(repeat):
        f = cpu_time(floor)
        o = cpu_time(ours)
        t_floor.add(f)
        t_ours.add(o)
        ratio.add(o / f)
    return t_floor, t_ours, ratio


def over_decode(g: gate.Gate, what: str, t_floor: gate.Runs, t_read: gate.Runs, mb: float) -> None:
    """The reader's own CPU over msgspec's decode of the same bytes, per MB, in calibration units
    (each pair's difference; a pair where the decode took longer counts 0)."""
    own = gate.Runs([max(0.0, r - f) for f, r in zip(t_floor.values, t_read.values)], list(t_read.loads))
    g.check_cpu(f"{what}: the reader's own cost over msgspec's decode", own, below=0.15, per=mb, per_what="MB")


def ms(runs: gate.Runs) -> gate.Runs:
    return gate.Runs([v * 1e3 for v in runs.values], runs.loads)


def split_docs(text: str) -> list[str]:
    """The documents of a concatenated stream as separate strings (each starts with '{' at a line
    start), for the json.loads floor."""
    parts = text.split("\n}\n")
    return [p + "\n}\n" for p in parts if p.strip()]


def real_64_jobs(work: Path) -> str:
    out = work / "jobs64.json"
    subprocess.run(
        [
            "fio",
            "--name=b",
            f"--directory={work}",
            "--size=256k",
            "--rw=randread",
            "--bs=4k",
            "--ioengine=psync",
            "--numjobs=64",
            "--runtime=1",
            "--time_based",
            "--output-format=json+",
            f"--output={out}",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out.read_text()


def synthetic_stream(work: Path, records: int = 600) -> str:
    out = work / "seed.json"
    subprocess.run(
        [
            "fio",
            "--name=s",
            f"--directory={work}",
            "--size=1m",
            "--rw=randrw",
            "--bs=4k",
            "--ioengine=psync",
            "--numjobs=4",
            "--runtime=2",
            "--time_based",
            "--output-format=json+",
            "--status-interval=1",
            f"--output={out}",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    seed = read_first_record(out.read_text())
    docs = []
    for i in range(1, records + 1):
        doc = json.loads(json.dumps(seed))
        doc["timestamp_ms"] = seed["timestamp_ms"] + 1000 * i
        doc["timestamp"] = doc["timestamp_ms"] // 1000
        for job in doc["jobs"]:
            job["job_runtime"] = 1000 * i
            job["elapsed"] = i
            for d in ("read", "write"):
                r = job[d]
                for k in ("io_bytes", "io_kbytes", "total_ios", "runtime"):
                    r[k] = r[k] * i
                clat = r["clat_ns"]
                clat["N"] *= i
                clat["bins"] = {k: v * i for k, v in clat["bins"].items()}
        docs.append(json.dumps(doc, indent=2, separators=(",", " : ")) + "\n")
    return "".join(docs)


def read_all(tailer: FileTailer) -> int:
    """Documents read until the end of the file (a poll reads at most MAX_READ_BYTES)."""
    n = 0
    while True:
        r = tailer.read_new()
        n += len(r.documents)
        if not r.new_bytes:
            return n


def read_first_record(text: str) -> dict:
    return json.JSONDecoder().raw_decode(text, text.index("{"))[0]


def part_reader(g: gate.Gate, work: Path, stream: str, repeat: int) -> None:
    jobs64 = real_64_jobs(work)
    print(f"64-job json+ result (real fio): {len(jobs64) / 1e6:.2f} MB")
    recs = read_text(jobs64).records
    assert len(recs) == 1 and len(recs[0].jobs) == 64
    t_floor, t_read, ratio = paired(lambda: json.loads(jobs64), lambda: read_text(jobs64), 10 * repeat + 1)
    print(f"  CPU: json.loads {ms(t_floor).describe('ms')}\n       reader     {ms(t_read).describe('ms')}")
    g.check("64-job result: reader / json.loads (paired runs)", ratio, below=1.5, unit="x", fmt=".2f")
    raw64 = jobs64.encode()
    t_floor, t_read, ratio = paired(lambda: msgspec.json.decode(raw64), lambda: read_text(jobs64), 10 * repeat + 1)
    print(f"  CPU: msgspec {ms(t_floor).describe('ms')}\n       reader  {ms(t_read).describe('ms')}")
    g.check("64-job result: reader / msgspec decode (paired runs)", ratio, below=2.5, unit="x", fmt=".2f")
    over_decode(g, "64-job result", t_floor, t_read, len(raw64) / 1e6)

    docs = split_docs(stream)
    assert len(docs) == 600
    print(
        f"10-minute 1 s status stream (synthesized from a real 4-job json+ record): "
        f"{len(docs)} records, {len(stream) / 1e6:.2f} MB"
    )
    assert len(read_text(stream).records) == 600
    t_floor, t_read, ratio = paired(lambda: [json.loads(d) for d in docs], lambda: read_text(stream), repeat)
    print(f"  CPU: json.loads {ms(t_floor).describe('ms')}\n       reader     {ms(t_read).describe('ms')}")
    g.check("600-record stream: reader / json.loads (paired runs)", ratio, below=1.5, unit="x", fmt=".2f")
    raws = [d.encode() for d in docs]
    t_floor, t_read, ratio = paired(lambda: [msgspec.json.decode(d) for d in raws], lambda: read_text(stream), repeat)
    print(f"  CPU: msgspec {ms(t_floor).describe('ms')}\n       reader  {ms(t_read).describe('ms')}")
    g.check("600-record stream: reader / msgspec decode (paired runs)", ratio, below=2.5, unit="x", fmt=".2f")
    over_decode(g, "600-record stream", t_floor, t_read, len(stream) / 1e6)

    # incremental: a tailer that has read 599 records gets the 600th appended
    path = work / "growing.json"
    head, last = "".join(docs[:-1]).encode(), docs[-1].encode()

    def incremental() -> float:
        path.write_bytes(head)
        tailer = FileTailer(str(path), skip_backlog=False)
        assert read_all(tailer) == 599
        with open(path, "ab") as fh:
            fh.write(last)
        t0 = time.perf_counter()
        got = tailer.read_new()
        dt = time.perf_counter() - t0
        assert len(got.documents) == 1 and got.new_bytes == len(last)
        return dt

    def full() -> None:
        tailer = FileTailer(str(path), skip_backlog=False)  # every record, as convert reads them
        assert read_all(tailer) == 600

    t_inc = gate.Runs()
    for _ in range(5):
        t_inc.add(incremental())
    t_full = gate.timed(full, repeat)
    t_one = gate.timed(lambda: json.loads(docs[-1]), 2 * repeat + 1)
    print(
        f"  last record appended: incremental read {ms(t_inc).describe('ms')}; json.loads of that record "
        f"{ms(t_one).describe('ms')}; full re-read {ms(t_full).describe('ms')}"
    )
    g.check("full re-read / incremental read (medians)", t_full.median / t_inc.median, at_least=100, unit="x")


ERROR_LINE = "fio: io_u error on file /dev/sdb: Input/output error: read offset=4096, buflen=4096"


def with_error_lines(docs: list[str]) -> list[str]:
    """Each record with an error line inserted in its middle, as fio writes them into --output."""
    out = []
    for d in docs:
        lines = d.split("\n")
        lines.insert(len(lines) // 2, ERROR_LINE)
        out.append("\n".join(lines))
    return out


def part_recovery(g: gate.Gate, docs: list[str], repeat: int = 3) -> None:
    print("error-line recovery: an error line inside every record, against a clean stream of the same size")
    per_size = {}
    for mb in (5, 10, 20):
        n = 0
        size = 0
        while size < mb * 1e6:
            size += len(docs[n % len(docs)])
            n += 1
        clean_docs = [docs[i % len(docs)] for i in range(n)]
        clean = "".join(clean_docs)
        bad = "".join(with_error_lines(clean_docs))

        def run(text: str) -> None:
            stream = DocumentStream()
            got = stream.feed(text)
            got.extend(stream.finish())
            assert len(got) == n, (len(got), n)

        t_clean, t_bad, ratio = paired(lambda: run(clean), lambda: run(bad), repeat)
        per_size[mb] = t_bad
        print(
            f"  {mb:2d} MB ({n} records): with error lines {t_bad.describe('s')}; clean {t_clean.describe('s')}; "
            f"ratio with / clean (paired) median {ratio.median:.2f}x"
        )
    print(f"  scaling with error lines: 10 MB / 5 MB {per_size[10].median / per_size[5].median:.2f}x (linear: 2)")
    g.check(
        "error-line recovery, 20 MB / 5 MB (medians; linear is 4)",
        per_size[20].median / per_size[5].median,
        below=6,
        unit="x",
        fmt=".2f",
    )


# ---- a real exporter process


class Exporter:
    def __init__(self, watch: Path, *extra: str):
        self.port = free_port()
        exe = Path(sys.executable).parent / "fio-exporter"
        # The log beside the watched directory, not in it (the exporter would read it as fio output).
        self.proc = start_process(
            "fio-exporter",
            [
                exe,
                "--web.listen-address",
                f"127.0.0.1:{self.port}",
                "--fio.watch",
                watch,
                "--no-collector.guest-disk",
                "--log.level",
                "error",
                *extra,
            ],
            watch.parent / f"{watch.name}-fio-exporter.log",
        )
        try:
            wait_for_http(f"http://127.0.0.1:{self.port}/-/healthy", 30, self.proc, status=200)
        except BaseException:
            self.stop()
            raise

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=120) as r:
            assert r.status == 200
            return r.read().decode()

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM")

    def stop(self) -> None:
        self.proc.stop(timeout=10)


def part_cpu(g: gate.Gate, work: Path, docs: list[str], interval: float, seconds: float, repeat: int = 3) -> None:
    print(
        f"exporter CPU while a status stream grows by 1 record/s, scraped every {interval:g} s for "
        f"{seconds:g} s, side by side with the same exporter on a complete stream (not growing)"
    )
    results: dict[str, list[tuple[float, float, float]]] = {"growing": [], "not growing": []}
    for _ in range(repeat):
        exporters, paths = {}, {}
        try:
            for mode in results:
                d = work / f"cpu-{mode.replace(' ', '-')}"
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir()
                paths[mode] = d / "stream.json"
                paths[mode].write_text("".join(docs[:60]))  # a minute of records already there
                exporters[mode] = Exporter(d)
                exporters[mode].scrape()  # first read of the backlog, not measured
            start = {m: (e.cpu_seconds(), time.monotonic()) for m, e in exporters.items()}
            t0, scrapes, written = time.monotonic(), 0, 0
            next_scrape = t0 + interval
            while True:
                now = time.monotonic()
                if now - t0 >= written + 1 and written < seconds:
                    with paths["growing"].open("a") as fh:
                        fh.write(docs[60 + written % (len(docs) - 60)])
                    written += 1
                if now >= next_scrape:
                    for e in exporters.values():
                        assert "fio_read_ios_total" in e.scrape()
                    scrapes += 1
                    next_scrape += interval
                    if next_scrape > t0 + seconds + 0.01:
                        break
                time.sleep(max(0.0, min(next_scrape, t0 + written + 1) - time.monotonic()))
            for mode, e in exporters.items():
                cpu0, wall0 = start[mode]
                cpu, wall = e.cpu_seconds() - cpu0, time.monotonic() - wall0
                results[mode].append((cpu / wall, cpu / scrapes, gate.load()))
        finally:
            for e in exporters.values():
                e.stop()
    share = {m: gate.Runs([r[0] * 100 for r in rs], [r[2] for r in rs]) for m, rs in results.items()}
    for mode, rs in results.items():
        per_scrape = gate.Runs([r[1] * 1e3 for r in rs], [r[2] for r in rs])
        print(f"  {mode:12s} CPU share of one core {share[mode].describe('%')}; per scrape {per_scrape.describe('ms')}")
    print(f"  growing / not growing (medians): {share['growing'].median / share['not growing'].median:.2f}x")
    g.check("exporter on a growing stream: CPU share of one core", share["growing"], below=2, unit="%")


def write_stream(path: Path, docs: list[str], size: int, mode: str = "w", first: int = 0) -> int:
    """fio's status records cycled from ``docs[first]`` until ``size`` characters are written;
    returns the records written."""
    with path.open(mode) as fh:
        written, i = 0, first
        while written < size:
            fh.write(docs[i % len(docs)])
            written += len(docs[i % len(docs)])
            i += 1
    return i - first


def write_garbage(path: Path, size: int) -> None:
    block = os.urandom(2**20)
    with path.open("wb") as fh:
        for _ in range(size // len(block)):
            fh.write(block)


def write_single_document(path: Path, docs: list[str], size: int) -> None:
    """One pretty-printed fio document with as many jobs as it takes to reach ``size``."""
    seed = json.loads(docs[0])
    jobs = [json.dumps(j, indent=2, separators=(",", " : ")).replace("\n", "\n    ") for j in seed["jobs"]]
    with path.open("w") as fh:
        fh.write('{\n  "fio version" : "fio-3.33",\n  "timestamp_ms" : %d,\n  "jobs" : [\n    ' % seed["timestamp_ms"])
        written, i = 0, 0
        while written < size:
            if i:
                fh.write(",\n    ")
            fh.write(jobs[i % len(jobs)])
            written += len(jobs[i % len(jobs)])
            i += 1
        fh.write("\n  ]\n}\n")


def source_counters(text: str) -> dict[str, float]:
    """The fio_source_* counters of the one watched file in a scrape (name without the prefix)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("fio_source_") and "{" in line:
            name = line[len("fio_source_") : line.index("{")]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def scrape_until_settled(exp: Exporter) -> tuple[str, dict[str, float]]:
    """Scrape until two scrapes in a row report the same records, skipped bytes and rejections:
    the exporter has read what it will read of the file (it reads at most 64 MiB a scrape)."""
    text = exp.scrape()
    seen = source_counters(text)
    while True:
        text = exp.scrape()
        now = source_counters(text)
        if "up" in now and all(
            now.get(k) == seen.get(k) for k in ("records_total", "skipped_bytes_total", "rejected_documents_total")
        ):
            return text, now
        seen = now


def part_rss(g: gate.Gate, work: Path, docs: list[str], repeat: int = 3) -> None:
    """Peak RSS of a real exporter per input, and what it read, checked from its own counters
    (issue 34: a helper that never looked could not tell a case that read 33 MiB of 200 MB from one
    that read it all). A late start on a large stream skips to its last records by design, so the
    case that reads every byte is a stream appended 50 MB between scrapes from an empty file."""
    print("exporter peak RSS (VmHWM) reading a file, its first scrape's time, and what it read")
    mb = 1_000_000
    doc_mean = sum(map(len, docs)) / len(docs)

    def clean(p: Path) -> int:
        return write_stream(p, docs, 200 * mb)

    inputs = {
        "1 MB clean stream (baseline)": lambda p: write_stream(p, docs, 1 * mb),
        "200 MB clean stream, exporter started late (skips to the last records)": clean,
        "200 MB garbage": lambda p: write_garbage(p, 200 * mb) or 0,
        "222 MB single document": lambda p: write_single_document(p, docs, 222 * mb) or 1,
    }
    base = None
    for name, make in inputs.items():
        d = work / "rss"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        path = d / "input.json"
        written = make(path)
        size = path.stat().st_size
        peaks, firsts = gate.Runs(), gate.Runs()
        for _ in range(repeat):
            exp = Exporter(d)
            try:
                t0 = time.monotonic()
                exp.scrape()
                firsts.add(time.monotonic() - t0)
                text, got = scrape_until_settled(exp)
                peaks.add(exp.peak_rss() / 2**20)
            finally:
                exp.stop()
        base = base or peaks.min
        records, skipped = got.get("records_total", 0), got.get("skipped_bytes_total", 0)
        read_mb = (size - skipped) / mb
        print(
            f"  {name}: first scrape {firsts.describe('s')} (up {got.get('up', 0):.0f}); read {read_mb:.0f} MB "
            f"of {size / mb:.0f} MB ({records:.0f} records, {skipped / mb:.0f} MB skipped); "
            f"{peaks.min / base:.2f}x the baseline's RSS"
        )
        if "clean" in name:
            # every record after the skipped part was read, and the latest one is exported
            want = written if not skipped else round((size - skipped) / doc_mean)
            g.require(
                f"{name}: every record of the part read was read, and the source is up",
                got.get("up") == 1 and abs(records - want) <= 2 and (skipped == 0 or read_mb >= 16),
                f"{records:.0f} records read, about {want} in the {read_mb:.0f} MB not skipped",
            )
        g.check(f"{name}: exporter peak RSS", peaks, below=100, unit="MiB", stat="max")
        shutil.rmtree(d, ignore_errors=True)

    # The case that reads all of 200 MB: appended 50 MB at a time between scrapes (each under the
    # 64 MiB a scrape reads), so nothing is skipped and every record goes through the reader.
    d = work / "rss"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    path = d / "input.json"
    path.write_text("")
    peaks = gate.Runs()
    exp = Exporter(d)
    try:
        exp.scrape()
        written = 0
        for _ in range(4):
            written += write_stream(path, docs, 50 * mb, mode="a", first=written)
            _, got = scrape_until_settled(exp)
        peaks.add(exp.peak_rss() / 2**20)
    finally:
        exp.stop()
    records, skipped = got.get("records_total", 0), got.get("skipped_bytes_total", 0)
    name = "200 MB stream appended 50 MB between scrapes (every byte read)"
    print(f"  {name}: {records:.0f} records read of {written} written, {skipped:.0f} bytes skipped")
    g.require(f"{name}: every record read, none skipped", records == written and skipped == 0 and got.get("up") == 1)
    g.check(f"{name}: exporter peak RSS", peaks, below=100, unit="MiB", stat="max")
    shutil.rmtree(d, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["reader", "recovery", "cpu", "rss", "all"], default="all")
    parser.add_argument(
        "--scrape-interval",
        type=float,
        default=15.0,
        help="cpu part: seconds between scrapes (default: %(default)s, Prometheus' default)",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="cpu part: length of a run (default: %(default)s)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="reader part: paired runs of the stream (default: %(default)s)"
    )
    args = parser.parse_args()
    g = gate.Gate("bench/fio_read.py")
    g.calibrate()
    if shutil.which("fio") is None:
        return g.cannot_measure("fio is not installed (make deps)")
    work = Path(tempfile.mkdtemp(prefix="fio-bench-"))
    try:
        stream = synthetic_stream(work)
        docs = split_docs(stream)
        if args.part in ("reader", "all"):
            part_reader(g, work, stream, args.repeat)
        if args.part in ("recovery", "all"):
            part_recovery(g, docs)
        if args.part in ("cpu", "all"):
            part_cpu(g, work, docs, args.scrape_interval, args.seconds)
        if args.part in ("rss", "all"):
            part_rss(g, work, docs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return g.verdict()


if __name__ == "__main__":
    sys.exit(main())
