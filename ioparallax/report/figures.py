"""Figures: matplotlib (Agg) drawn to inline SVG, deterministic bytes for the same data.

Text is drawn as paths (``svg.fonttype = "path"``), so the page needs no font and looks the same in
every browser and in the PDF; ``svg.hashsalt`` and empty metadata make ids and headers stable.
Axis units: bytes/s in IEC units (KiB/s, MiB/s), latency in us/ms/s, operations in IO/s.
"""

from __future__ import annotations

import csv
import io
import math
import re
from datetime import datetime, timezone
from typing import Iterable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.backends import backend_svg as _svg  # noqa: E402
from matplotlib.figure import Figure as MplFigure  # noqa: E402
from matplotlib.ticker import FuncFormatter, Locator, MaxNLocator  # noqa: E402

# One colour per view, the dashboards' (mixin/dashboards_panels.py LAYER_COLORS), in print-safe shades.
COLORS = {"guest": "#2e7d32", "guest_os": "#7b1fa2", "vm": "#1565c0", "storage": "#ef6c00",
          "zero": "#d32f2f", "compare": "#616161"}
LABELS = {"guest": "guest (fio)", "guest_os": "guest OS (block layer)", "vm": "VM (vCenter)",
          "storage": "storage (Stargate)"}

plt.rcParams.update({
    "svg.fonttype": "path",
    "svg.hashsalt": "ioparallax-report",
    "font.family": "DejaVu Sans",
    "font.size": 8.5,
    "axes.titlesize": 9.5,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e0e0e0",
    "grid.linewidth": 0.6,
    "legend.fontsize": 7.5,
    "legend.frameon": False,
    "lines.linewidth": 1.4,
})


def to_svg(fig: MplFigure) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog), then closed."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    svg = text[start:]
    # Scale with the page: the width attribute in pt would fix the size.
    head_end = svg.find(">")
    head = svg[:head_end]
    head = re.sub(r'\swidth="[^"]*"', ' width="100%"', head, count=1)
    head = re.sub(r'\sheight="[^"]*"', "", head, count=1)
    return head + svg[head_end:]


def _convert_path(self, path, transform=None, clip=None, simplify=None, sketch=None) -> str:
    """matplotlib's SVG path writer with one decimal instead of six: figures are drawn at 72
    points per inch, so a tenth of a point is invisible, and the SVG is half the size and faster
    to write than rounding it afterwards."""
    clip = (0.0, 0.0, self.width, self.height) if clip else None
    return _svg._path.convert_to_string(path, transform, clip, simplify, sketch, 1,
                                        [b"M", b"L", b"Q", b"C", b"z"], False).decode("ascii")


if callable(getattr(getattr(_svg, "RendererSVG", None), "_convert_path", None)) and hasattr(_svg, "_path"):
    _svg.RendererSVG._convert_path = _convert_path     # private API: without it, six decimals


# -- units ------------------------------------------------------------------------------------

def fmt_bytes(x: float, _pos: object = None) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(x) >= div:
            v = x / div
            return f"{v:.0f} {unit}" if v >= 100 else f"{v:.3g} {unit}"
    return f"{x:.0f} B"


def fmt_bytes_rate(x: float, _pos: object = None) -> str:
    return fmt_bytes(x) + "/s" if x else "0"


def fmt_seconds(x: float, _pos: object = None) -> str:
    if x == 0:
        return "0"
    if abs(x) < 1e-3:
        return f"{x * 1e6:.3g} us"
    if abs(x) < 1:
        return f"{x * 1e3:.3g} ms"
    return f"{x:.3g} s"


def fmt_ops(x: float, _pos: object = None) -> str:
    if abs(x) >= 1e6:
        return f"{x / 1e6:.3g}M"
    if abs(x) >= 1e3:
        return f"{x / 1e3:.3g}k"
    return f"{x:.3g}"


class BytesLocator(Locator):
    """Round ticks in the IEC unit of the axis (0, 10, 20 MiB/s), not in bytes (38.1 MiB/s)."""

    def __init__(self) -> None:
        self.inner = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10])

    def __call__(self):
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin: float, vmax: float):
        div = 1.0
        for d in (2**30, 2**20, 2**10):
            if max(abs(vmin), abs(vmax)) >= d:
                div = float(d)
                break
        return np.asarray(self.inner.tick_values(vmin / div, vmax / div)) * div


def unit_axis(ax, quantity: str, axis: str = "y") -> None:
    """Units on an axis: bytes/s in IEC units with round ticks, seconds as us/ms, IO/s with k/M."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_formatter(FuncFormatter(FORMATTERS[quantity]))
    if quantity == "bytes":
        target.set_major_locator(BytesLocator())


FORMATTERS = {"ops": fmt_ops, "bytes": fmt_bytes_rate, "latency_seconds": fmt_seconds}
UNIT_LABEL = {"ops": "IO/s", "bytes": "bytes/s", "latency_seconds": "mean latency"}


def as_dates(times: np.ndarray) -> np.ndarray:
    """The x values of every time axis: unix seconds as they are (no date conversion: matplotlib's
    date axes cost most of a figure's drawing time)."""
    return np.asarray(times, dtype=float)


_TICK_STEPS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


class TimeLocator(Locator):
    """Ticks on round clock times (every 5 s ... 1 day), about six per axis."""

    def __call__(self):
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin: float, vmax: float):
        span = max(vmax - vmin, 1.0)
        step = next((s for s in _TICK_STEPS if span / s <= 7), _TICK_STEPS[-1])
        first = math.ceil(vmin / step) * step
        return np.arange(first, vmax + 1e-9, step)


def time_axis(ax, times: np.ndarray) -> None:
    """UTC clock times; seconds shown when the range is short enough to need them."""
    short = len(times) > 1 and times[-1] - times[0] < 900
    fmt = "%H:%M:%S" if short else "%H:%M"
    ax.xaxis.set_major_locator(TimeLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _p: datetime.fromtimestamp(x, timezone.utc).strftime(fmt)))
    if len(times) > 1:
        ax.set_xlim(float(times[0]), float(times[-1]))


def headroom(ax, factor: float = 1.15) -> None:
    """From 0 to a little above the highest line, so a flat line does not sit on the frame."""
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top * factor if top > 0 else 1)


def has_data(a: np.ndarray | None) -> bool:
    return a is not None and bool(np.any(~np.isnan(a)))


def series_csv(times: np.ndarray, columns: dict[str, np.ndarray]) -> str:
    """A CSV of aligned series: time (ISO 8601 UTC), unix time, one column per series (rows where
    every series is empty are left out)."""
    names = list(columns)
    if not names:
        return "time,unix\n"
    data = np.vstack([columns[n] for n in names])
    keep = ~np.all(np.isnan(data), axis=0)
    stamps = np.datetime_as_string(times.astype("datetime64[s]"), unit="s")
    cells = np.char.mod("%.6g", np.nan_to_num(data, nan=0.0))
    cells = np.where(np.isnan(data), "", cells)
    lines = ["time,unix," + ",".join(_csv_field(n) for n in names)]
    for i in np.nonzero(keep)[0]:
        lines.append(f"{stamps[i]}Z,{times[i]:.0f}," + ",".join(cells[:, i]))
    return "\n".join(lines) + "\n"


def _csv_field(text: str) -> str:
    return f'"{text}"' if any(c in text for c in ',"\n') else text


def rows_csv(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(header))
    for r in rows:
        w.writerow(list(r))
    return buf.getvalue()
