"""Every esxtop sample with the capture's own timestamps, for backfilling (common/backfill.py).

A scrape sees a capture's latest sample; a capture copied off a host after the run holds all of
them, 2-5 s apart and in the past. ``esxtop-exporter backfill`` writes each sample as the
``_sample_`` gauges a scrape would have shown at that moment (same names and labels, without
the ``job``/``instance`` that Prometheus adds to scraped series), stamped with the sample's time:
so the dashboards' 2 s VM view queries read a backfilled capture too.
"""

from __future__ import annotations

from collections.abc import Iterator

from ioparallax.exporters.common.backfill import BackfillWriter
from ioparallax.exporters.common.exposition import label_block
from ioparallax.exporters.esxtop.collector import CPU_LABELS, MB, STORAGE, VDISK_LABELS, _layer_name
from ioparallax.exporters.esxtop.parse import LAYERS
from ioparallax.exporters.esxtop.reader import EsxtopFile, ObjectState

_MS = 1e-3

VDISK = (
    ("commands_per_second", 0, 1.0, "Commands/sec"),
    ("read_ops_per_second", 1, 1.0, "Reads/sec"),
    ("write_ops_per_second", 2, 1.0, "Writes/sec"),
    ("read_bytes_per_second", 3, MB, "MBytes Read/sec x 2^20"),
    ("write_bytes_per_second", 4, MB, "MBytes Written/sec x 2^20"),
    ("read_latency_seconds", 5, _MS, "Average MilliSec/Read"),
    ("write_latency_seconds", 6, _MS, "Average MilliSec/Write"),
)
STORAGE_RATES = VDISK[:5]
CPU = (("used", 0), ("run", 1), ("ready", 2), ("costop", 3))


def _storage_rows(prefix: str) -> Iterator[tuple[str, int, float, str]]:
    for suffix, i, scale, doc in STORAGE_RATES:
        yield f"{prefix}_sample_{suffix}", i, scale, doc
    i = 5
    for layer in LAYERS:
        for op in ("command", "read", "write"):
            word = "Command" if op == "command" else op.capitalize()
            yield _layer_name(f"{prefix}_sample", layer, op), i, _MS, f"Average {layer.capitalize()} MilliSec/{word}"
            i += 1


#: kind -> [(family, field index, scale, HELP)]
ROWS: dict[str, list[tuple[str, int, float, str]]] = {
    "vdisk": [(f"esxtop_virtual_disk_sample_{s}", i, sc, d) for s, i, sc, d in VDISK],
    "cpu": [(f"esxtop_vm_cpu_sample_{w}_ratio", i, 0.01, f"Group Cpu % {w}") for w, i in CPU],
    **{kind: list(_storage_rows(prefix)) for kind, (prefix, _) in STORAGE.items()},
}

FAMILIES: dict[str, str] = {
    name: f"One esxtop sample, at its own time ({doc}; backfilled)."
    for rows in ROWS.values()
    for name, _, _, doc in rows
}


class Backfill:
    """Writes each sample of an EsxtopFile as it is read (EsxtopFile.on_sample)."""

    def __init__(self, writer: BackfillWriter) -> None:
        self.writer = writer
        self._labels: dict[tuple[str, str, tuple[str, ...]], str] = {}

    def __call__(self, src: EsxtopFile, ts: float, states: list[ObjectState]) -> None:
        w = self.writer
        for st in states:
            v = st.latest
            if v is None:
                continue
            k = (src.path, st.kind, st.key)
            labels = self._labels.get(k)
            if labels is None:
                labels = self._labels[k] = self._block(src, st)
            for name, i, scale, _ in ROWS[st.kind]:
                value = v[i]
                if value is not None:
                    w.add(name, labels, ts, value * scale)

    @staticmethod
    def _block(src: EsxtopFile, st: ObjectState) -> str:
        if st.kind == "vdisk":
            return label_block(VDISK_LABELS, [src.name, src.host, st.key[0], st.key[1]])
        if st.kind == "cpu":
            return label_block(CPU_LABELS, [src.name, src.host, st.key[0]])
        return label_block(["source", "host", STORAGE[st.kind][1]], [src.name, src.host, st.key[0]])
