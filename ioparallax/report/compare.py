"""--compare: the key numbers of each VM disk on both sides (A: the report's range and Prometheus,
B: the other) and their deltas. The figures of the disk pages overlay B dashed (disks.py). B's disks
are paired with A's by ioparallax.report.pairing (same VM and disk address, or a pairs file) and
carry A's names in B's dataset; the table names both, and which manager each side's VM view came
from. An ordinary section builder (builders.report_builders), given both sides and the pairs."""

from __future__ import annotations

import math

import numpy as np

from ioparallax.report.analysis import Side, vm_view_words
from ioparallax.report.data import Dataset, Key
from ioparallax.report.figures import fmt_bytes_rate, fmt_ops, fmt_seconds, rows_csv
from ioparallax.report.sections import Section, esc


def _mean(ds: Dataset, key: Key, *fams: str) -> float:
    found = [ds.get(f, key) for f in fams]
    arrays = [a for a in found if a is not None]
    if not arrays:
        return math.nan
    stacked = np.vstack(arrays)
    total = np.nansum(stacked, axis=0)
    total[np.all(np.isnan(stacked), axis=0)] = np.nan
    return float(np.nanmean(total)) if np.any(~np.isnan(total)) else math.nan


# (title, families summed, formatter)
KEY_NUMBERS = (
    ("guest bytes/s", ("guest_read_bytes", "guest_write_bytes"), fmt_bytes_rate),
    ("VM bytes/s", ("vm_read_bytes", "vm_write_bytes"), fmt_bytes_rate),
    ("storage bytes/s", ("storage_read_bytes", "storage_write_bytes"), fmt_bytes_rate),
    ("guest IO/s", ("guest_read_ops", "guest_write_ops"), fmt_ops),
    ("VM IO/s", ("vm_read_ops", "vm_write_ops"), fmt_ops),
    ("VM read latency", ("vm_read_latency_seconds",), fmt_seconds),
    ("VM write latency", ("vm_write_latency_seconds",), fmt_seconds),
)


def key_numbers(ds: Dataset, key: Key) -> dict[str, float]:
    return {title: _mean(ds, key, *fams) for title, fams, _ in KEY_NUMBERS}


def delta(a: float, b: float) -> str:
    if math.isnan(a) or math.isnan(b):
        return "n/a"
    if a == 0:
        return "n/a" if b == 0 else "new"
    return f"{(b - a) / a * 100:+.0f} %"


def compare_section(a: Side, b: Side, pairs: dict[Key, Key]) -> Section:
    """The table of key numbers and verdicts, A against B; ``pairs`` maps an A disk to the B disk
    paired with it (under A's name in B's dataset)."""
    ctx, b_ctx = a.ctx, b.ctx
    a_ds, b_ds = a.data, b.data
    a_v, b_v = a.verdicts.get(), b.verdicts.get()
    keys = sorted(set(a_ds.disks()) | set(b_ds.disks()))
    fmt = {title: f for title, _, f in KEY_NUMBERS}
    head = "".join(
        f"<th>{esc(t)}<span class='thr'>A / {esc(b_ctx.label)} / delta</span></th>" for t, _, _ in KEY_NUMBERS
    )
    rows, csv_rows = [], []
    for key in keys:
        na, nb = key_numbers(a_ds, key), key_numbers(b_ds, key)
        cells = []
        for t in na:
            fa = "—" if math.isnan(na[t]) else fmt[t](na[t])
            fb = "—" if math.isnan(nb[t]) else fmt[t](nb[t])
            cells.append(f"<td>{esc(fa)}<br>{esc(fb)}<br><b>{esc(delta(na[t], nb[t]))}</b></td>")
            bk = pairs.get(key, key)
            csv_rows.append((key[0], key[1], bk[0], bk[1], t, na[t], nb[t]))
        changed = [
            f"{k}: {a_v[key][k].state.value} -> {b_v[key][k].state.value}"
            for k in a_v.get(key, {})
            if key in b_v and a_v[key][k].state != b_v[key][k].state
        ]
        cells.append(f"<td>{esc('; '.join(changed) or 'same verdicts')}</td>")
        bk = pairs.get(key, key)
        b_name = f"<br><span class='thr'>{esc(b_ctx.label)}: {esc(bk[0])} {esc(bk[1])}</span>" if bk != key else ""
        rows.append(f"<tr><th>{esc(key[0])}<br>{esc(key[1])}{b_name}</th>{''.join(cells)}</tr>")
    other_label = esc(b_ctx.label)
    where_a = f" {{{esc(ctx.match)}}}" if ctx.match else ""
    where_b = f" {{{esc(b_ctx.match)}}}" if b_ctx.match else ""
    html = (
        f"<p>A: {esc(ctx.api.url)}{where_a}, the report's range. {other_label}: "
        f"{esc(b_ctx.api.url)}{where_b}, its own range (drawn dashed on every disk page, shifted to A's start). "
        f"Means over each range; delta is ({other_label} - A) / A.</p>"
        f"<p>VM view: A from {esc(vm_view_words(a_ds))}; {other_label} from {esc(vm_view_words(b_ds))}. "
        f"A VM disk of {other_label} pairs with the one of A with the same VM name and disk address (vCenter's "
        f"scsi0:1 is Prism's scsi.1), or as --compare-pairs says; {len(pairs)} paired, "
        f"{sum(1 for k in keys if k not in a_ds.disks() or k not in b_ds.disks())} on one side only.</p>"
        f"<table class='compare'><thead><tr><th>VM disk</th>{head}<th>Verdicts that change</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return Section(
        id="compare",
        title=f"Compare A with {b_ctx.label}",
        html=html,
        csv={
            "compare.csv": rows_csv(
                [
                    "vm",
                    "disk",
                    f"{b_ctx.label} vm",
                    f"{b_ctx.label} disk",
                    "number",
                    "A",
                    b_ctx.label,
                ],
                csv_rows,
            )
        },
    )
