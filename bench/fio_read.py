"""How fast the fio reader is, against json.loads of the same bytes (the floor).

Inputs (made at start, in a temp dir):
- a 64-job json+ result from a REAL fio run (64 jobs of 1 s on small files, psync);
- a 10-minute status stream at 1 s (600 records), SYNTHESIZED from a real 4-job json+ status
  record: the record is replicated with cumulative values (ios, bytes, runtime, N, bins counts,
  timestamps) growing record by record, written in fio's pretty-printed style.

Prints for each: best-of-N time of the reader (text -> records) and of json.loads (per
document), and the ratio; then the cost of an incremental read of the last appended record
against re-reading the whole stream. Target: reader within 3x of the floor; incremental read of
one record a small fraction of a full re-read (O(new bytes)).

Run: .venv/bin/python bench/fio_read.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from exporters.fio.reader import read_text  # noqa: E402
from exporters.fio.tailer import FileTailer  # noqa: E402


def best(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def split_docs(text: str) -> list[str]:
    """The documents of a concatenated stream as separate strings (each starts with '{' at a line
    start), for the json.loads floor."""
    parts = text.split("\n}\n")
    return [p + "\n}\n" for p in parts if p.strip()]


def real_64_jobs(work: Path) -> str:
    out = work / "jobs64.json"
    subprocess.run(["fio", "--name=b", f"--directory={work}", "--size=256k", "--rw=randread", "--bs=4k",
                    "--ioengine=psync", "--numjobs=64", "--runtime=1", "--time_based",
                    "--output-format=json+", f"--output={out}"], check=True, capture_output=True, timeout=120)
    return out.read_text()


def synthetic_stream(work: Path, records: int = 600) -> str:
    out = work / "seed.json"
    subprocess.run(["fio", "--name=s", f"--directory={work}", "--size=1m", "--rw=randrw", "--bs=4k",
                    "--ioengine=psync", "--numjobs=4", "--runtime=2", "--time_based", "--output-format=json+",
                    "--status-interval=1", f"--output={out}"], check=True, capture_output=True, timeout=120)
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


def main() -> int:
    if shutil.which("fio") is None:
        print("fio is not installed")
        return 1
    work = Path(tempfile.mkdtemp(prefix="fio-bench-"))
    try:
        jobs64 = real_64_jobs(work)
        stream = synthetic_stream(work)
        print(f"64-job json+ result (real fio): {len(jobs64) / 1e6:.2f} MB")
        t_floor = best(lambda: json.loads(jobs64))
        t_read = best(lambda: read_text(jobs64))
        recs = read_text(jobs64).records
        assert len(recs) == 1 and len(recs[0].jobs) == 64
        print(f"  json.loads {t_floor * 1e3:8.2f} ms   reader {t_read * 1e3:8.2f} ms   ratio {t_read / t_floor:.2f}x")

        docs = split_docs(stream)
        assert len(docs) == 600
        print(f"10-minute 1 s status stream (synthesized from a real 4-job json+ record): "
              f"{len(docs)} records, {len(stream) / 1e6:.2f} MB")
        t_floor = best(lambda: [json.loads(d) for d in docs], 3)
        t_read = best(lambda: read_text(stream), 3)
        assert len(read_text(stream).records) == 600
        print(f"  json.loads {t_floor * 1e3:8.2f} ms   reader {t_read * 1e3:8.2f} ms   ratio {t_read / t_floor:.2f}x")

        # incremental: a tailer that has read 599 records gets the 600th appended
        path = work / "growing.json"
        head, last = "".join(docs[:-1]).encode(), docs[-1].encode()

        def incremental() -> float:
            path.write_bytes(head)
            tailer = FileTailer(str(path))
            assert read_all(tailer) == 599
            with open(path, "ab") as fh:
                fh.write(last)
            t0 = time.perf_counter()
            got = tailer.read_new()
            dt = time.perf_counter() - t0
            assert len(got.documents) == 1 and got.new_bytes == len(last)
            return dt

        def full() -> None:
            tailer = FileTailer(str(path))
            assert read_all(tailer) == 600

        t_inc = min(incremental() for _ in range(5))
        t_full = best(full, 3)
        t_one = best(lambda: json.loads(docs[-1]))
        print(f"  last record appended: incremental read {t_inc * 1e3:.3f} ms "
              f"(json.loads of that record {t_one * 1e3:.3f} ms), full re-read {t_full * 1e3:.1f} ms, "
              f"full/incremental {t_full / t_inc:.0f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
