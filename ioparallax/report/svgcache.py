"""Drawn SVG kept and written again: the ticks, axes, texts, backgrounds and legends of the
report's figures.

A hundred VM disks' pages draw the same figures with other data: the same time ticks at the same
places, value ticks with the same few labels at other heights, the same titles, frames and
legends. matplotlib makes and draws every tick (a grid line, a tick mark and a label, each an
artist), text and legend anew, which was most of a page's drawing. Here the SVG matplotlib writes
for each is kept, and written again where the same one is drawn:

- a tick, per axis and per label text, drawn once by matplotlib at a fixed place (the middle of
  its axes) and written at its place inside ``<g transform="translate(...)">``. The kept SVG does
  not depend on where the tick was first seen, so a page's bytes do not depend on which pages the
  process drew before it (the report's pages are drawn by several processes).
- an axis whose locator and formatter say that its ticks depend on its view alone
  (``ticks_from_view_only``: the report's time axis), whole, per view; any other axis without
  measuring its tick labels where nothing is placed by them.
- a text (a title, a note), per string, place and style, once seen twice; a patch (a background,
  a spine), per drawn place and style.
- a legend, per what makes it look as it does: where it is anchored (fixed places only, not
  "best"), its texts and the style of each handle; :func:`legend` does not even make the Legend
  where the same one was drawn before. A legend of another kind of handle is drawn by matplotlib
  each time.

What the kept SVG needs besides itself goes with it: the clip rectangles and hatch patterns it
refers to (matplotlib writes them at the end of the figure) and the definitions of its tick marks
and text glyphs, left out where the figure has them already.

Only figures written as SVG are concerned: another renderer (Agg, ``draw_without_rendering``) draws
as matplotlib does. Private matplotlib API (the SVG writer's state); without it nothing is kept.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib import (
    artist as _martist,
    axis as _maxis,
    collections as _mcollections,
    legend as _mlegend,
    lines as _mlines,
    patches as _mpatches,
    text as _mtext,
)
from matplotlib.backends import backend_svg as _svg
from matplotlib.figure import FigureBase

_GLYPH_DEF = re.compile(r'<path id="([^"]+)"(?: d="[^"]*")? transform="scale\(0\.015625\)"/>\n?')
_EMPTY_DEFS = re.compile(r"<defs>\s*</defs>\s*")
_STATE = ("_markers", "_clipd", "_hatchd", "_glyph_map")


@dataclass
class Fragment:
    """SVG text that matplotlib wrote, cut into plain text and definitions (a tick mark's, a
    glyph's) written only where the figure does not have them yet."""

    pieces: list[tuple[str, str | None, Any]] = field(default_factory=list)  # (text, "m"/"g"/None, key)
    markers: dict = field(default_factory=dict)
    glyphs: dict = field(default_factory=dict)
    clips: dict = field(default_factory=dict)
    hatches: dict = field(default_factory=dict)


def svg_renderer(renderer: Any) -> Any:
    """The SVG writer behind ``renderer`` (savefig draws through a MixedModeRenderer), or None."""
    inner = getattr(renderer, "_renderer", renderer)
    return inner if isinstance(inner, _svg.RendererSVG) else None


def _writer_api(r: Any) -> tuple[Any, Any] | None:
    w = getattr(r, "writer", None)
    flush = getattr(w, "_XMLWriter__flush", None)
    write = getattr(w, "_XMLWriter__write", None)
    if flush is None or write is None or not all(hasattr(r, s) for s in _STATE):
        return None
    return flush, write


AVAILABLE = hasattr(_svg, "RendererSVG")


def capture(r: Any, draw: Any) -> Fragment | None:
    """What ``draw()`` writes to the SVG renderer ``r``, kept (and not written: see :func:`write`).
    Drawn with an empty state of definitions, so that the fragment defines every tick mark and glyph
    it uses, and names every clip and hatch it refers to. None where the writer is not the one this
    module knows (it then draws as usual)."""
    api = _writer_api(r)
    if api is None:
        draw()
        return None
    flush, _ = api
    w = r.writer
    flush()  # the '>' of the open parent element goes out now, not into the fragment
    out: list[str] = []
    saved = [getattr(r, s) for s in _STATE]
    for s in _STATE:
        setattr(r, s, {})
    real = w._XMLWriter__write  # the file's write, set by the writer's constructor
    w._XMLWriter__write = out.append
    try:
        draw()
        flush()
    finally:
        w._XMLWriter__write = real
        got = [getattr(r, s) for s in _STATE]
        for s, old in zip(_STATE, saved):
            setattr(r, s, old)
    markers, clips, hatches, glyphs = got
    return _cut("".join(out), markers, clips, hatches, glyphs)


def _svg_key(renderer: Any, artist: Any, key_of: Any) -> tuple[Any, tuple | None]:
    """The SVG renderer behind ``renderer``, and ``key_of(artist)``: None where this module does not
    draw (another backend, a writer it does not know, an artist it cannot key)."""
    r = svg_renderer(renderer)
    return r, (key_of(artist) if r is not None and _writer_api(r) is not None else None)


def _draw_kept(r: Any, artist: Any, cache: dict, key: tuple, room: int, draw: Any) -> None:
    """Write the fragment kept in ``cache`` under ``key``; when there is none, ``draw`` captured (and
    kept while the cache holds fewer than ``room``). Where :func:`capture` drew as usual, nothing more."""
    frag = cache.get(key)
    if frag is None:
        frag = capture(r, draw)
        if frag is None:
            return
        if len(cache) < room:
            cache[key] = frag
    write(r, frag)
    artist.stale = False


def _as_written(text: str) -> str:
    return text


# What a kept fragment's text goes through once when kept (figures sets it to figures.compact: the
# figure's SVG goes through it too, so a fragment kept compact leaves it less to do).
tidy: Callable[[str], str] = _as_written


def _cut(text: str, markers: dict, clips: dict, hatches: dict, glyphs: dict) -> Fragment:
    frag = Fragment(markers=markers, glyphs=glyphs, clips=clips, hatches=hatches)
    cuts: list[tuple[int, int, str, Any]] = []
    for key, oid in markers.items():
        m = re.search(r"<defs>\s*<path id=\"" + re.escape(oid) + r'"[^>]*/>\s*</defs>\n?', text)
        if m:
            cuts.append((m.start(), m.end(), "m", key))
    by_id = {g.replace("%20", "_"): g for g in glyphs}  # RendererSVG._adjust_glyph_repr
    for m in _GLYPH_DEF.finditer(text):
        if m.group(1) in by_id:
            cuts.append((m.start(), m.end(), "g", by_id[m.group(1)]))
    cuts.sort()
    at = 0
    for start, end, kind, key in cuts:
        if start < at:  # a glyph inside a marker's definition: cannot be
            continue
        frag.pieces.append((tidy(text[at:start]), None, None))
        frag.pieces.append((tidy(text[start:end]), kind, key))
        at = end
    frag.pieces.append((tidy(text[at:]), None, None))
    return frag


def write(r: Any, frag: Fragment, dx: float = 0.0, dy: float = 0.0) -> None:
    """Write ``frag`` to the SVG renderer ``r``, moved by ``(dx, dy)`` (SVG units), with the
    definitions the figure does not have yet, and register its clips and hatches."""
    w = r.writer
    w._XMLWriter__flush()
    out = []
    skipped = False
    moved = dx or dy
    if moved:
        out.append(f'<g transform="translate({dx:.1f} {dy:.1f})">')
    for text, kind, key in frag.pieces:
        if kind == "m":
            if key in r._markers:
                continue
            r._markers[key] = frag.markers[key]
        elif kind == "g":
            if key in r._glyph_map:
                skipped = True
                continue
            r._glyph_map[key] = frag.glyphs[key]
        out.append(text)
    if moved:
        out.append("</g>")
    r._clipd.update(frag.clips)
    r._hatchd.update(frag.hatches)
    text = "".join(out)
    if skipped:  # no definitions left: no <defs>, as matplotlib writes it
        text = _EMPTY_DEFS.sub("", text)
    w._XMLWriter__write(text)


# -- ticks ------------------------------------------------------------------------------------

_TICKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Axes -> {tick key: Fragment}
_tick_draw = _maxis.Tick.draw


def _tick_key(tick: Any) -> tuple:
    g, t1, t2, l1, l2 = tick.gridline, tick.tick1line, tick.tick2line, tick.label1, tick.label2
    return (
        type(tick),
        tick._major,
        l1.get_text() if l1.get_visible() else None,
        l2.get_text() if l2.get_visible() else None,
        g.get_visible(),
        t1.get_visible(),
        t2.get_visible(),
        # The style, which tick_params could change on a figure drawn again.
        g.get_color(),
        g.get_linewidth(),
        t1.get_markersize(),
        t1.get_markeredgewidth(),
        t1.get_color(),
        l1.get_fontsize(),
        l1.get_color(),
        l1.get_rotation(),
        tick.get_pad(),
        tick.get_tickdir(),
    )


def draw_tick(tick: Any, renderer: Any) -> None:
    """Tick.draw, kept per axes and label text, drawn at the middle of the axes and moved."""
    r = svg_renderer(renderer)
    ax = tick.axes
    if r is None or ax is None or not tick.get_visible() or _writer_api(r) is None:
        return _tick_draw(tick, renderer)
    x_tick = isinstance(tick, _maxis.XTick)
    trans = ax.get_xaxis_transform("grid") if x_tick else ax.get_yaxis_transform("grid")
    bbox = ax.bbox
    loc = tick.get_loc()
    if loc is None:
        return _tick_draw(tick, renderer)
    if x_tick:
        middle = (bbox.x0 + bbox.x1) / 2
        at = trans.transform((loc, 0.0))[0]
        mid_loc = trans.inverted().transform((middle, 0.0))[0]
    else:
        middle = (bbox.y0 + bbox.y1) / 2
        at = trans.transform((0.0, loc))[1]
        mid_loc = trans.inverted().transform((0.0, middle))[1]
    key = (_tick_key(tick), round(middle, 3), bbox.bounds)
    kept = _TICKS.setdefault(ax, {})
    frag = kept.get(key)
    if frag is None:
        tick.update_position(mid_loc)
        try:
            frag = capture(r, lambda: _tick_draw(tick, renderer))
        finally:
            tick.update_position(loc)
        if frag is None:
            return None
        kept[key] = frag
    shift = at - middle
    # SVG's y axis points down.
    write(r, frag, shift if x_tick else 0.0, 0.0 if x_tick else -shift)
    tick.stale = False
    return None


# -- axes' axis: the tick labels measured only where something is placed by them -------------------

_axis_draw = _maxis.Axis.draw


_AXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Axis -> {view key: Fragment}


def _view_only(axis: Any) -> bool:
    """The axis' ticks and labels depend on its view interval alone: its locator and formatter
    say so (``ticks_from_view_only``, the report's time axis), and it has no minor ticks."""
    return (
        getattr(axis.major.locator, "ticks_from_view_only", False)
        and getattr(axis.major.formatter, "ticks_from_view_only", False)
        and type(axis.minor.locator).__name__ == "NullLocator"
    )


def draw_axis(axis: Any, renderer: Any) -> None:
    """Axis.draw without measuring every tick label where nothing is placed by them: matplotlib
    measures them to lift the axis label (here at a fixed place, figures.to_svg) and to place the
    offset text (empty with the report's formatters). An axis whose ticks depend on its view alone
    (the time axis: the same on every VM disk's page) is kept whole, per view. Else matplotlib's own."""
    r = svg_renderer(renderer)
    if (
        r is None
        or _writer_api(r) is None
        or not axis.get_visible()
        or getattr(axis, "_autolabelpos", True)
        or not hasattr(axis, "_update_ticks")
    ):
        return _axis_draw(axis, renderer)
    if not _view_only(axis):
        return _draw_axis(axis, renderer)
    key = (
        tuple(axis.get_view_interval()),
        tuple(axis.axes.bbox.bounds),
        repr(sorted(getattr(axis, "_major_tick_kw", {}).items())),
        axis.label.get_text(),
        tuple(axis.label.get_position()),
    )
    return _draw_kept(r, axis, _AXES.setdefault(axis, {}), key, 16, lambda: _draw_axis(axis, renderer))


def _draw_axis(axis: Any, renderer: Any) -> None:
    renderer.open_group("matplotlib.axis", gid=axis.get_gid())
    ticks = axis._update_ticks()
    offset = axis.major.formatter.get_offset()
    if offset:
        tlb1, tlb2 = axis._get_ticklabel_bboxes(ticks, renderer)
    for tick in ticks:
        tick.draw(renderer)
    axis.label.draw(renderer)
    if offset:
        axis._update_offset_text_position(tlb1, tlb2)
    axis.offsetText.set_text(offset)
    axis.offsetText.draw(renderer)
    renderer.close_group("matplotlib.axis")
    axis.stale = False


# -- patches: the backgrounds of figures and axes, the spines ---------------------------------------

_PATCHES: dict[tuple, Fragment] = {}
_patch_draw = _mpatches.Patch.draw


def _patch_key(p: Any) -> tuple | None:
    if (
        not p.get_visible()
        or p.get_rasterized()
        or p.get_hatch()
        or p.get_path_effects()
        or p.get_sketch_params() is not None
        or p.get_url()
        or getattr(p, "_gapcolor", None) is not None
        or p.get_clip_path() is not None
    ):
        return None
    path = p.get_path()
    if len(path.vertices) > 16:
        return None
    clip = p.get_clip_box() if p.get_clip_on() else None
    return (
        type(p).__name__,
        p.get_transform().transform(path.vertices).round(3).tobytes(),
        None if path.codes is None else path.codes.tobytes(),
        tuple(p.get_facecolor()),
        tuple(p.get_edgecolor()),
        p.get_linewidth(),
        repr(getattr(p, "_dash_pattern", None)),
        p.get_capstyle(),
        p.get_joinstyle(),
        p.get_antialiased(),
        p.get_snap(),
        p.get_alpha(),
        p.get_fill(),
        None if clip is None else tuple(clip.bounds),
    )


def draw_patch(patch: Any, renderer: Any) -> None:
    """Patch.draw, kept per drawn place and style: the same backgrounds and spines on every page."""
    r, key = _svg_key(renderer, patch, _patch_key)
    if key is None:
        return _patch_draw(patch, renderer)
    return _draw_kept(r, patch, _PATCHES, key, 1024, lambda: _patch_draw(patch, renderer))


# -- texts: titles, notes -----------------------------------------------------------------------

_TEXTS: dict[tuple, Fragment] = {}
_SEEN_TEXTS: set[tuple] = set()
_text_draw = _mtext.Text.draw


def _text_key(t: Any) -> tuple | None:
    if (
        type(t) is not _mtext.Text
        or not t.get_visible()
        or not t.get_text()
        or t.get_bbox_patch() is not None
        or t.get_path_effects()
        or t.get_usetex()
        or t.get_clip_on()
        and (t.get_clip_box() is not None or t.get_clip_path() is not None)
        or t.get_url()
    ):
        return None
    x, y = t.get_transform().transform(t.get_unitless_position())
    return (
        t.get_text(),
        round(float(x), 3),
        round(float(y), 3),
        t.get_fontproperties(),
        str(t.get_color()),
        t.get_alpha(),
        t.get_horizontalalignment(),
        t.get_verticalalignment(),
        t.get_rotation(),
        t.get_rotation_mode(),
        t.get_linespacing(),
        t.get_wrap(),
        t.get_antialiased(),
    )


def draw_text(text: Any, renderer: Any) -> None:
    """Text.draw, kept per string, place and style (titles, the notes of empty axes)."""
    r, key = _svg_key(renderer, text, _text_key)
    if key is None:
        return _text_draw(text, renderer)
    text._renderer = renderer
    if key not in _TEXTS and key not in _SEEN_TEXTS:  # a text seen once (a title naming a vdisk) is drawn, not kept
        if len(_SEEN_TEXTS) < 8192:
            _SEEN_TEXTS.add(key)
        return _text_draw(text, renderer)
    return _draw_kept(r, text, _TEXTS, key, 4096, lambda: _text_draw(text, renderer))


# -- legends ----------------------------------------------------------------------------------

_LEGENDS: dict[tuple, Fragment] = {}
_legend_draw = _mlegend.Legend.draw


def _handle_key(h: Any) -> tuple | None:
    if isinstance(h, _mlines.Line2D):
        return (
            "line",
            str(h.get_color()),
            h.get_linewidth(),
            h.get_linestyle(),
            getattr(h, "_unscaled_dash_pattern", None),
            h.get_alpha(),
            h.get_drawstyle(),
            str(h.get_marker()),
            h.get_visible(),
        )
    if isinstance(h, _mpatches.Rectangle):
        return (
            "patch",
            tuple(h.get_facecolor()),
            tuple(h.get_edgecolor()),
            h.get_hatch(),
            h.get_linewidth(),
            h.get_alpha(),
            h.get_visible(),
        )
    if isinstance(h, _mcollections.PolyCollection):  # a stacked area's handle
        return (
            "areas",
            repr(np.asarray(h.get_facecolor()).tolist()),
            repr(np.asarray(h.get_edgecolor()).tolist()),
            h.get_hatch(),
            repr(np.asarray(h.get_linewidth()).tolist()),
            h.get_alpha(),
            h.get_visible(),
        )
    return None


def _legend_key(legend: Any) -> tuple | None:
    loc = getattr(legend, "_loc", 0)
    if not isinstance(loc, int) or loc == 0:  # "best" depends on the data; a point, on more
        return None
    handles = [_handle_key(h) for h in legend.legend_handles]
    if any(h is None for h in handles) or legend.get_title().get_text():
        return None
    parent = legend.parent
    return (
        "figure" if legend.isaxes is False else "axes",
        tuple(parent.bbox.bounds),
        loc,
        tuple(legend.get_bbox_to_anchor().bounds),
        legend._ncols,
        legend.prop.get_size(),
        tuple(t.get_text() for t in legend.texts),
        tuple(handles),
        legend.get_frame_on(),
        legend.get_visible(),
    )


def draw_legend(legend: Any, renderer: Any) -> None:
    """Legend.draw, kept per anchor, texts and handle styles."""
    r, key = _svg_key(renderer, legend, _legend_key)
    if key is None:
        return _legend_draw(legend, renderer)
    spec = getattr(legend, "_svgcache_spec", None)
    if spec is not None and key not in _LEGENDS and len(_SPECS) < 256:
        _SPECS[spec] = key  # the legend's spec names this key once it is kept (legend() checks that)
    return _draw_kept(r, legend, _LEGENDS, key, 256, lambda: _legend_draw(legend, renderer))


# A legend asked for (parent, handles, labels, keywords) -> the key of the legend it made.
_SPECS: dict[tuple, tuple] = {}


class KeptLegend(_martist.Artist):
    """Where a legend of the same parent place, texts, handle styles and keywords was drawn
    before: its SVG written again, without making the Legend (its boxes, handles and texts cost
    more than drawing them)."""

    zorder = 5  # a Legend's

    def __init__(self, key: tuple, make: Any) -> None:
        super().__init__()
        self.key = key
        self.make = make

    def draw(self, renderer: Any) -> None:
        r = svg_renderer(renderer)
        frag = _LEGENDS.get(self.key)
        if r is None or frag is None or _writer_api(r) is None:
            self.make().draw(renderer)  # another renderer: the legend itself
        else:
            write(r, frag)
        self.stale = False


def _spec_key(parent: Any, handles: list, labels: list[str], kw: dict) -> tuple | None:
    keys = [_handle_key(h) for h in handles]
    if any(k is None for k in keys) or kw.get("loc", "best") in ("best", 0) or "title" in kw:
        return None
    fig = parent if isinstance(parent, FigureBase) else parent.figure
    place = tuple(parent.get_position().bounds) if hasattr(parent, "get_position") else None
    return (
        type(parent).__name__,
        tuple(fig.get_window_extent().bounds),
        place,
        tuple(labels),
        tuple(keys),
        repr(sorted(kw.items())),
    )


def legend(parent: Any, handles: list, labels: list[str], **kw: Any) -> Any:
    """``parent.legend(handles, labels, **kw)`` (an Axes or a Figure), or a :class:`KeptLegend`
    where the same legend was drawn before."""
    spec = _spec_key(parent, handles, labels, kw)
    key = _SPECS.get(spec) if spec is not None else None
    if key is None or key not in _LEGENDS:
        made = parent.legend(handles, labels, **kw)
        made._svgcache_spec = spec
        return made
    kept = KeptLegend(key, lambda: _mlegend.Legend(parent, handles, labels, **kw))
    parent.add_artist(kept)
    return kept


def install() -> None:
    """Draw ticks and legends through the kept SVG (idempotent)."""
    if AVAILABLE and _maxis.Tick.draw is not draw_tick:
        # private API (the SVG writer's state): a speed-up only. setattr: a patch of a method, which
        # mypy rightly refuses as an assignment.
        setattr(_maxis.Tick, "draw", draw_tick)  # noqa: B010
        setattr(_mlegend.Legend, "draw", draw_legend)  # noqa: B010
        setattr(_maxis.Axis, "draw", draw_axis)  # noqa: B010
        setattr(_mtext.Text, "draw", draw_text)  # noqa: B010
        setattr(_mpatches.Patch, "draw", draw_patch)  # noqa: B010
