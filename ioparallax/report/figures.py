"""Figures: matplotlib (Agg) drawn to inline SVG, deterministic bytes for the same data.

Text is drawn as paths (``svg.fonttype = "path"``), so the page needs no font and looks the same in
every browser and in the PDF; ``svg.hashsalt`` and empty metadata make ids and headers stable.
Axis units: bytes/s in IEC units (KiB/s, MiB/s), latency in us/ms/s, operations in IO/s.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeGuard

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import (  # noqa: E402
    _text_helpers as _mtext_helpers,
    artist as _martist,
    cbook as _cbook,
    collections as _mcollections,
    colors as _mcolors,
    lines as _mlines,
    text as _mtext,
    textpath as _mtextpath,
)
from matplotlib.backends import backend_svg as _svg  # noqa: E402
from matplotlib.figure import Figure as MplFigure  # noqa: E402
from matplotlib.path import Path  # noqa: E402
from matplotlib.ticker import Formatter, FuncFormatter, Locator, MaxNLocator, TickHelper  # noqa: E402

from ioparallax.report import svgcache  # noqa: E402

# One colour per view, the dashboards' (ioparallax/mixin/dashboards/panels.py LAYER_COLORS), in print-safe shades.
COLORS = {
    "guest": "#2e7d32",
    "guest_os": "#7b1fa2",
    "vm": "#1565c0",
    "storage": "#ef6c00",
    "zero": "#d32f2f",
    "compare": "#616161",
}
LABELS = {
    "guest": "guest (fio)",
    "guest_os": "guest OS (block layer)",
    "vm": "VM (vCenter)",
    "storage": "storage (Stargate)",
}

plt.rcParams.update(
    {
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
        # Titles at a fixed height above the axes: matplotlib otherwise measures every axis' tick labels
        # at each draw to lift the title above them (a quarter of a figure's drawing time), and no
        # figure here has tick labels on top.
        "axes.titley": 1.0,
    }
)


_REUSED: dict[str, tuple[MplFigure, Any]] = {}


def reused(kind: str, make: Callable[[], tuple[MplFigure, Any]]) -> tuple[MplFigure, Any]:
    """One figure per kind, per process, drawn again for every VM disk: its data, texts and legends
    are removed and its axes autoscale again, but its axes and their ticks are kept. Making the axes
    and the ticks of a new figure cost about a third of its drawing time (clearing the axes costs
    the same: it makes new ticks). ``make`` returns ``(figure, axes)`` of a
    ``matplotlib.figure.Figure`` (not pyplot's, which would keep it in its list of open figures)."""
    got = _REUSED.get(kind)
    if got is None:
        got = _REUSED[kind] = make()
        return got
    fig = got[0]
    for legend in [*fig.legends, *fig.artists]:
        legend.remove()
    for ax in fig.axes:
        for artist in [*ax.lines, *ax.collections, *ax.patches, *ax.texts, *ax.images, *ax.artists]:
            artist.remove()
        if ax.legend_ is not None:
            ax.legend_.remove()
        ax.set_title("")
        ax.relim()  # empty data limits: the next lines set them afresh
        ax.set_autoscale_on(True)
    return got


_STYLES: dict[tuple, _mlines.Line2D] = {}


def line_style(**style: Any) -> _mlines.Line2D:
    """A Line2D without data holding ``style`` (plot's keywords), one per style: the look of the
    data lines drawn by :class:`DataLines`, and their legend handle."""
    key = tuple(sorted(style.items()))
    got = _STYLES.get(key)
    if got is None:
        got = _STYLES[key] = _mlines.Line2D([], [], **style)
    return got


class DataLines(_martist.Artist):
    """The data lines of one axes, written by the renderer's path writer as matplotlib's Line2D
    writes them (the same clip, dashes, caps, joins and colours, from :func:`line_style`), without
    a Line2D per line: making one, caching its transformed path and drawing it cost more than
    writing its points (a page draws about 40). Added by :func:`line`."""

    zorder = 2  # a Line2D's

    def __init__(self, ax: Any) -> None:
        super().__init__()
        self.series: list[tuple[np.ndarray, np.ndarray, _mlines.Line2D]] = []
        self.set_clip_path(ax.patch)  # the axes' rectangle, as Axes.add_line does

    def draw(self, renderer: Any) -> None:
        if not self.get_visible() or self.axes is None:
            return
        trans = self.axes.transData
        renderer.open_group("line2d", self.get_gid())
        for x, y, st in self.series:
            if st.get_drawstyle() == "steps-post":
                x, y = _cbook.pts_to_poststep(x, y)
            xy = trans.transform(np.column_stack([x, y]))
            if not len(xy) or st.get_linewidth() <= 0:
                continue
            gc = renderer.new_gc()
            self._set_gc_clip(gc)  # type: ignore[attr-defined]
            gc.set_antialiased(st.get_antialiased())
            gc.set_linewidth(st.get_linewidth())
            dashed = st.is_dashed()
            gc.set_joinstyle(st.get_dash_joinstyle() if dashed else st.get_solid_joinstyle())
            gc.set_capstyle(st.get_dash_capstyle() if dashed else st.get_solid_capstyle())
            gc.set_snap(st.get_snap())
            gc.set_foreground(_mcolors.to_rgba(st.get_color(), st.get_alpha()), isRGBA=True)
            gc.set_dashes(*st._dash_pattern)  # type: ignore[attr-defined]
            renderer.draw_path(gc, Path(xy), _IDENTITY)
            gc.restore()
        renderer.close_group("line2d")
        self.stale = False


_IDENTITY = matplotlib.transforms.IdentityTransform()


def line(ax: Any, x: np.ndarray, y: np.ndarray, **style: Any) -> _mlines.Line2D:
    """``ax.plot(x, y, **style)`` for a data line (no markers): drawn by the axes' DataLines, its
    points counted in the axes' data limits. Returns the style's Line2D, the legend handle."""
    lines = next((a for a in ax.artists if isinstance(a, DataLines)), None)
    if lines is None:
        lines = DataLines(ax)
        ax.add_artist(lines)
    st = line_style(**style)
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    lines.series.append((x, y, st))
    finite = np.isfinite(x) & np.isfinite(y)
    if finite.any():
        fx, fy = x[finite], y[finite]
        ax.update_datalim([(fx.min(), fy.min()), (fx.max(), fy.max())])
    lines.stale = True
    return st


def stack(ax: Any, x: np.ndarray, ys: list[np.ndarray], colors: list[str], labels: list[str], alpha: float) -> list:
    """``ax.stackplot(x, *ys, colors=colors, labels=labels, alpha=alpha)`` (finite values, zero
    baseline), its areas made as fill_between makes them (each layer's polygon: its top at the first
    point, along the layer below, its top at the last point, back along its top) without
    fill_between's unit, where and step handling, and its data limits counted once: a quarter of a
    stacked figure's time."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    below = np.zeros(n)
    areas = []
    for y, color, label in zip(ys, colors, labels):
        top = below + np.asarray(y, dtype=float)
        pts = np.empty((2 * n + 2, 2))
        pts[0] = x[0], top[0]
        pts[1 : n + 1, 0], pts[1 : n + 1, 1] = x, below
        pts[n + 1] = x[-1], top[-1]
        pts[n + 2 :, 0], pts[n + 2 :, 1] = x[::-1], top[::-1]
        area = _mcollections.PolyCollection([pts], facecolors=color, alpha=alpha, label=label)
        ax.add_collection(area, autolim=False)
        areas.append(area)
        below = top
    if n and areas:
        ax.update_datalim([(x.min(), 0.0), (x.max(), float(below.max()))])
    return areas


def to_svg(fig: MplFigure) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog), then closed (a figure of
    pyplot's; a reused one stays as it is)."""
    buf = io.StringIO()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if not axis.label.get_text():
                # No axis label: a fixed place for it, else matplotlib measures every tick label at
                # each draw to place an empty text.
                axis.set_label_coords(0.5, 0.0)
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
    return compact(head + svg[head_end:]).strip()


_COMMENT = re.compile(r"<!--.*?-->", re.S)
_BETWEEN_TAGS = re.compile(r">\s+<")
# A place with a number of two decimals or more (a place already to a tenth is left alone: the kept
# SVG of svgcache is written compact).
_PLACES = re.compile(r'(?<=[ ("])(?:[xy]="|translate\()(?=[-\d. ]*?\d\.\d\d)[-\d. ]+')
_DECIMALS = re.compile(r"-?\d+\.\d{2,}")


def _round_place(m: re.Match) -> str:
    return _DECIMALS.sub(lambda n: f"{float(n.group()):.1f}", m.group())


_GROUP_ID = re.compile(r'<g id="[^"]*"')


def compact(svg: str) -> str:
    """What matplotlib writes for people, not browsers, left out: comments (the text of each label),
    indentation, the ids of groups (nothing refers to them, and every figure repeats them: an HTML
    page must not), empty groups, and positions of ticks and glyphs to six decimals (one is a tenth
    of a point)."""
    svg = _COMMENT.sub("", svg)
    svg = _BETWEEN_TAGS.sub("><", svg)
    svg = _GROUP_ID.sub("<g", svg)
    while "<g></g>" in svg:
        svg = svg.replace("<g></g>", "")
    return _PLACES.sub(_round_place, svg)


def _lines_only(codes: np.ndarray | None) -> bool:
    """No curve in the path (np.isin costs ten times more on the short paths of ticks and grid)."""
    return codes is None or not ((codes == Path.CURVE3) | (codes == Path.CURVE4)).any()


# Paths shorter than this go to matplotlib's writer as they are: a tick, a grid line or a frame
# saves a few bytes, and formatting them here cost more than drawing them.
SHORT_PATH = 16


def _tenths(values: np.ndarray) -> str:
    """Numbers given in tenths of a point as SVG path numbers: "12.3 -4 .5" (one decimal, no ".0",
    no leading 0, no space before a minus sign)."""
    # repr of k / 10 is the shortest text of that float: the "%.1f" digits, a third faster.
    text = " " + " ".join(map(repr, (values / 10).tolist())) + " "
    text = text.replace(".0 ", " ").replace(" 0.", " .").replace("-0.", "-.").replace(" -", "-")
    return text.strip()


def path_data(vertices: np.ndarray, codes: np.ndarray) -> str | None:
    """A polyline path (moves, lines, closes) as compact SVG path data: each subpath's start absolute
    (``M``), its points relative to the one before (``l``, the command letter once), coordinates to a
    tenth of a point (figures are drawn at 72 points per inch: a tenth is invisible). Rounded first,
    then differenced, so the error does not add up along a line. ``None`` for another path (curves,
    or a line after a close without a move), which matplotlib's writer handles."""
    keep = codes != Path.STOP
    v, c = vertices[keep], codes[keep]
    if not c.size:
        return ""
    if c[0] != Path.MOVETO or not _lines_only(c):
        return None
    closes = np.flatnonzero(c == Path.CLOSEPOLY)
    if closes.size and not np.all((closes + 1 == c.size) | (c[np.minimum(closes + 1, c.size - 1)] == Path.MOVETO)):
        return None
    t = np.rint(v * 10)
    delta = np.diff(t, axis=0, prepend=t[:1])
    out: list[str] = []
    starts = np.flatnonzero(c == Path.MOVETO)
    for i, a in enumerate(starts):
        b = starts[i + 1] if i + 1 < starts.size else c.size
        closed = c[b - 1] == Path.CLOSEPOLY
        end = b - 1 if closed else b
        out.append("M" + _tenths(t[a]))
        if end > a + 1:
            out.append("l" + _tenths(delta[a + 1 : end].ravel()))
        if closed:
            out.append("z")
    return "".join(out)


def _convert_path(self, path, transform=None, clip=None, simplify=None, sketch=None) -> str:
    """matplotlib's SVG path writer, smaller: polylines (every line of data) as :func:`path_data`
    (relative, a tenth of a point: about half the bytes of matplotlib's absolute coordinates with six
    decimals); other paths (glyphs with curves) with one decimal."""
    clip = (0.0, 0.0, self.width, self.height) if clip else None
    glyph = transform is None and not clip and not simplify and sketch is None
    if glyph:  # a glyph of the text (font units): the same in every figure, converted once
        key = (path.vertices.tobytes(), None if path.codes is None else path.codes.tobytes())
        if (d := _GLYPH_DATA.get(key)) is not None:
            return d
    d = None
    if sketch is None and len(path.vertices) >= SHORT_PATH and _lines_only(path.codes):
        cleaned = path.cleaned(transform=transform, remove_nans=True, clip=clip, simplify=bool(simplify), curves=True)
        d = path_data(cleaned.vertices, cleaned.codes)
    if d is None:
        d = (
            # matplotlib/_path.pyi (3.11) leaves out convert_to_string, which the C extension has.
            _svg._path.convert_to_string(  # type: ignore[attr-defined]
                path, transform, clip, simplify, sketch, 1, [b"M", b"L", b"Q", b"C", b"z"], False
            )
            .decode("ascii")
            .replace(" \n", "")
            .replace("\n", "")
        )
    if glyph and len(_GLYPH_DATA) < 4096:
        _GLYPH_DATA[key] = d
    return d


_GLYPH_DATA: dict[tuple[bytes, bytes | None], str] = {}


if callable(getattr(getattr(_svg, "RendererSVG", None), "_convert_path", None)) and hasattr(_svg, "_path"):
    # private API: without it, six decimals. setattr: a patch of a method, which mypy rightly refuses
    # as an assignment.
    setattr(_svg.RendererSVG, "_convert_path", _convert_path)  # noqa: B010


# Text drawn as paths is measured and laid out anew in each figure (matplotlib caches both per
# renderer, and each figure's SVG has its own), while a hundred VM disks' figures repeat the same few
# hundred labels: a quarter of the drawing time. Both depend only on the string and the font (text
# to path works at one fixed size and no hinting), so they are kept across figures.
_TEXT_TO_PATH = _mtextpath.TextToPath()
_figure_text_metrics = getattr(_mtext, "_get_text_metrics_with_cache", None)


@functools.lru_cache(maxsize=8192)
def _svg_text_metrics(text: str, fontprop: Any, ismath: Any, dpi: float) -> tuple[float, float, float]:
    return _TEXT_TO_PATH.get_text_width_height_descent(text, fontprop, ismath)


def _text_metrics(renderer, text, fontprop, ismath, dpi):
    # savefig draws through a MixedModeRenderer around the SVG renderer (its _renderer).
    if isinstance(getattr(renderer, "_renderer", renderer), _svg.RendererSVG):
        return _svg_text_metrics(text, fontprop.copy(), ismath, dpi)
    assert _figure_text_metrics is not None, "installed only where matplotlib has it"
    return _figure_text_metrics(renderer, text, fontprop, ismath, dpi)


_LAYOUTS: dict[tuple, list[tuple[str, float, float]]] = {}
_GLYPH_PATHS: dict[str, tuple] = {}
_glyphs_with_font = _mtextpath.TextToPath.get_glyphs_with_font


def _cached_glyphs_with_font(
    self, font, s, glyph_map=None, return_new_glyphs_only=False, *, features=None, language=None
):
    """TextToPath.get_glyphs_with_font, its layout of ``s`` kept per font file and string."""
    key = (font.fname, s, tuple(features) if features else None, language)
    items = _LAYOUTS.get(key)
    if items is None:
        items = []
        for item in _mtext_helpers.layout(s, font, features=features, language=language):
            glyph = self._get_glyph_repr(item.ft_object, item.glyph_index)
            if glyph not in _GLYPH_PATHS:
                _GLYPH_PATHS[glyph] = item.ft_object.get_path()
            items.append((glyph, item.x, item.y))
        if len(_LAYOUTS) < 8192:
            _LAYOUTS[key] = items
    if glyph_map is None:
        glyph_map = OrderedDict()
    new = OrderedDict() if return_new_glyphs_only else glyph_map
    for glyph, _x, _y in items:
        if glyph not in glyph_map:
            new[glyph] = _GLYPH_PATHS[glyph]
    return [(g, x, y, 1.0) for g, x, y in items], new, []


if (
    callable(_figure_text_metrics)
    and hasattr(_mtext_helpers, "layout")
    and hasattr(_mtextpath.TextToPath, "_get_glyph_repr")
):
    # private API: a speed-up only. setattr: text.pyi leaves out the private function, and mypy
    # rightly refuses the assignment of a method.
    setattr(_mtext, "_get_text_metrics_with_cache", _text_metrics)  # noqa: B010
    setattr(_mtextpath.TextToPath, "get_glyphs_with_font", _cached_glyphs_with_font)  # noqa: B010


# Ticks and legends drawn once and written again (svgcache): a third of a page's drawing. What it
# keeps is kept compact, so that compact() has little left to do where it is written.
svgcache.install()
svgcache.tidy = compact


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


def _view_interval(helper: TickHelper) -> tuple[float, float]:
    """The view limits of the axis a locator or formatter draws on (matplotlib attaches it first)."""
    if helper.axis is None:
        raise ValueError(f"{type(helper).__name__} used before matplotlib attached it to an axis")
    vmin, vmax = helper.axis.get_view_interval()
    return vmin, vmax


class BytesLocator(Locator):
    """Round ticks in the IEC unit of the axis (0, 10, 20 MiB/s), not in bytes (38.1 MiB/s)."""

    def __init__(self) -> None:
        self.inner = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10])

    def __call__(self):
        vmin, vmax = _view_interval(self)
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


_TICK_STEPS = (
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
    2 * 86400,
    7 * 86400,
)


def _tick_step(vmin: float, vmax: float) -> int:
    span = max(vmax - vmin, 1.0)
    return next((s for s in _TICK_STEPS if span / s <= 7), _TICK_STEPS[-1])


class TimeLocator(Locator):
    """Ticks on round clock times (every 5 s ... 1 week), about six per axis."""

    ticks_from_view_only = True  # svgcache keeps the drawn axis per view

    def __call__(self):
        vmin, vmax = _view_interval(self)
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin: float, vmax: float):
        step = _tick_step(vmin, vmax)
        first = math.ceil(vmin / step) * step
        return np.arange(first, vmax + 1e-9, step)


def time_format(vmin: float, vmax: float) -> str:
    """The strftime format of the ticks TimeLocator puts between vmin and vmax: as fine as the step
    between ticks (seconds below a minute, the date once the axis spans more than a day), so no
    two ticks read the same (10:41 10:41 10:41 at 15 s ticks)."""
    step = _tick_step(vmin, vmax)
    if step < 60:
        return "%H:%M:%S"
    if step >= 86400:
        return "%Y-%m-%d"
    return "%H:%M" if vmax - vmin <= 86400 else "%m-%d %H:%M"


class TimeFormatter(Formatter):
    """UTC clock times in the format of the axis' tick step (time_format)."""

    ticks_from_view_only = True

    def __call__(self, x: float, pos: object = None) -> str:
        vmin, vmax = _view_interval(self)
        return datetime.fromtimestamp(x, UTC).strftime(time_format(vmin, vmax))


def time_axis(ax, times: np.ndarray) -> None:
    """UTC clock times on round ticks, seconds shown when the ticks are less than a minute apart."""
    ax.xaxis.set_major_locator(TimeLocator())
    ax.xaxis.set_major_formatter(TimeFormatter())
    if len(times) > 1:
        ax.set_xlim(float(times[0]), float(times[-1]))


def headroom(ax, factor: float = 1.1) -> None:
    """From 0 to 10 % above the highest value drawn, so a flat line at the maximum (a steady
    benchmark) is drawn inside the axes, not on the frame."""
    top = ax.dataLim.y1 if ax.dataLim.height >= 0 else math.nan
    ax.set_ylim(0, top * factor if math.isfinite(top) and top > 0 else 1)


def axes_points(ax) -> int:
    """Two points per horizontal pixel of the axes (the figure drawn at 72 pixels per inch)."""
    return max(16, int(2 * ax.get_position().width * ax.get_figure().get_figwidth() * 72))


def thin_index(y: np.ndarray, max_points: int, flat: bool = True) -> np.ndarray:
    """Indices of at most about ``max_points`` points of ``y`` that draw the same line: the lowest
    and the highest point of each bucket of consecutive points, in time order. A burst must not
    vanish: the maximum of each bucket is kept, so a one-point spike is drawn at its height (an
    average or every n-th point would flatten or skip it); an all-empty bucket keeps one empty
    point, so a gap stays a gap. The default step of the report (range / 600) gives fewer points
    than this; a small --step over a long range is thinned."""
    n = len(y)
    if n <= max_points:
        return flat_index(y) if flat else np.arange(n)
    per = math.ceil(n / max(1, max_points // 2))
    buckets = math.ceil(n / per)
    grid = np.concatenate([y, np.full(buckets * per - n, np.nan)]).reshape(buckets, per)
    empty = np.isnan(grid)
    lo = np.where(empty, np.inf, grid).argmin(axis=1)
    hi = np.where(empty, -np.inf, grid).argmax(axis=1)
    idx = (np.stack([lo, hi], axis=1) + (np.arange(buckets) * per)[:, None]).ravel()
    idx = np.unique(idx[idx < n])
    return idx[flat_index(y[idx])] if flat else idx


def flat_index(y: np.ndarray) -> np.ndarray:
    """Indices of ``y`` without the inside of runs of equal values (or of empty points): the first
    and the last point of a run draw the same line, plain or as steps (vCenter's 20 s sample is the
    same value at every step within it). ``y`` 2-D: layers drawn together (a stack), a point is left
    out only where every layer is flat."""
    n = y.shape[-1]
    if n < 3:
        return np.arange(n)
    same = (y[..., 1:] == y[..., :-1]) | (np.isnan(y[..., 1:]) & np.isnan(y[..., :-1]))
    if same.ndim > 1:
        same = same.all(axis=0)
    inside = np.zeros(n, dtype=bool)
    inside[1:-1] = same[:-1] & same[1:]
    return np.flatnonzero(~inside)


def thin(ax, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` thinned to two points per horizontal pixel of ``ax`` (thin_index)."""
    idx = thin_index(y, axes_points(ax))
    return x[idx], y[idx]


def has_data(a: np.ndarray | None) -> TypeGuard[np.ndarray]:
    """The series exists and has a value at some step (a TypeGuard: where it holds, ``a`` is an array)."""
    return a is not None and bool(np.any(~np.isnan(a)))


def series_csv(times: np.ndarray, columns: dict[str, np.ndarray]) -> str:
    """A CSV of aligned series: time (ISO 8601 UTC), unix time, one column per series (rows where
    every series is empty are left out)."""
    names = list(columns)
    if not names:
        return "time,unix\n"
    data = np.vstack([columns[n] for n in names])
    keep = ~np.all(np.isnan(data), axis=0)
    idx = np.nonzero(keep)[0].tolist()
    stamps = np.datetime_as_string(times.astype("datetime64[s]"), unit="s").tolist()
    # Each row formatted by one "%.6g,%.6g,..." % values (NaN written "nan", then made an empty
    # cell: no other number's text holds "nan"): a third faster than a format call per cell.
    row = ",".join(["%.6g"] * len(names))
    rows = data[:, keep].T.tolist()
    head = "time,unix," + ",".join(_csv_field(n) for n in names) + "\n"
    if not idx:
        return head
    body = "\n".join(f"{stamps[i]}Z,{times[i]:.0f}," + row % tuple(r) for i, r in zip(idx, rows))
    return head + body.replace("nan", "") + "\n"


def _csv_field(text: str) -> str:
    """A header cell as RFC 4180 writes it: quoted when it holds a comma, quote or line break, a
    quote inside doubled (a series named by a label value may hold any of them)."""
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def rows_csv(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(header))
    for r in rows:
        w.writerow(list(r))
    return buf.getvalue()
