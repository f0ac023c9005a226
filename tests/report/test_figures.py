"""The report's figures: thinning keeps bursts, time axes never repeat a label, flat lines stay
inside the axes, and a figure drawn again for another VM disk gives the same SVG as a new one."""

from __future__ import annotations

import re
import urllib.parse

import numpy as np
import pytest
from matplotlib.figure import Figure as MplFigure
from matplotlib.path import Path

from ioparallax.mixin.config import load_config
from ioparallax.report import disks, figures
from ioparallax.report.context import ReportContext
from ioparallax.report.data import Dataset
from ioparallax.report.page import data_uri, shared_glyphs
from ioparallax.report.promapi import PromAPI
from ioparallax.report.sections import Figure, Section

T0 = 1_763_900_000.0


def test_thinning_keeps_a_one_point_spike_and_gaps():
    y = np.full(36_000, 100.0)
    y[12_345] = 5_000.0  # one 1-point burst in 10 hours of seconds
    y[20_000:20_500] = np.nan  # a gap of 500 points
    idx = figures.thin_index(y, 700)
    assert len(idx) <= 700
    assert 12_345 in idx and np.nanmax(y[idx]) == 5_000.0
    assert np.isnan(y[idx]).any()  # the gap is still drawn as a gap
    assert np.all(np.diff(idx) > 0)  # in time order
    few = np.arange(600.0)
    assert np.array_equal(figures.thin_index(few, 700), np.arange(600))  # short series untouched


@pytest.mark.parametrize("span", [75, 300, 899, 3600, 6 * 3600, 3 * 86400, 30 * 86400])
def test_time_axis_never_repeats_a_label(span):
    fig = MplFigure(figsize=(5, 2))
    ax = fig.subplots()
    times = T0 + np.linspace(0, span, 200)
    ax.plot(times, np.ones_like(times))
    figures.time_axis(ax, times)
    fig.draw_without_rendering()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert len(labels) >= 2, labels
    assert len(set(labels)) == len(labels), labels
    if span < 300:  # ticks less than a minute apart
        assert all(lab.count(":") == 2 for lab in labels), labels  # seconds shown


def test_flat_line_has_headroom_above_it():
    fig = MplFigure(figsize=(5, 2))
    ax = fig.subplots()
    ax.plot(T0 + np.arange(60.0), np.full(60, 5_000.0))
    figures.headroom(ax)
    assert ax.get_ylim() == pytest.approx((0, 5_500))
    empty = MplFigure().subplots()
    figures.headroom(empty)
    assert empty.get_ylim() == (0, 1)


def _dataset(n: int = 120) -> tuple[ReportContext, Dataset]:
    times = T0 + 5 * np.arange(n)
    ds = Dataset(times=times)
    wave = 1 + 0.2 * np.sin(np.arange(n) / 7)
    a, b = ("vm-a", "scsi0:1"), ("vm-b", "scsi0:1")
    for layer in ("guest", "vm", "storage"):
        for q, base in (("ops", 3000.0), ("bytes", 3000 * 4096.0), ("latency_seconds", 0.0005)):
            ds.series.setdefault(f"{layer}_read_{q}", {})[a] = base * wave
            ds.series.setdefault(f"{layer}_write_{q}", {})[a] = 0.5 * base * wave
            ds.series[f"{layer}_read_{q}"][b] = np.full(n, base * 2)  # b: flat reads, no writes
    ds.promql = {"read_sources": "q1", "write_destinations": "q2"}
    ds.vdisk_of = {a: "1", b: "2"}
    ds.labelled["read_sources"] = [
        ({"vdisk_id": vd, "source": s}, np.full(n, v))
        for vd in ("1", "2")
        for s, v in (("oplog", 1e6), ("estore_zero", 2e6))
    ]
    ctx = ReportContext(
        api=PromAPI("http://127.0.0.1:9"), start=float(times[0]), end=float(times[-1]), step=5.0, config=load_config()
    )
    return ctx, ds


def test_a_reused_figure_draws_the_same_svg_as_a_new_one():
    ctx, ds = _dataset()
    a, b = ("vm-a", "scsi0:1"), ("vm-b", "scsi0:1")
    figures._REUSED.clear()
    fresh_a = disks.three_views(ctx, ds, a, None).svg
    fresh_src_a = disks.read_sources(ctx, ds, a, None, "read_sources").svg
    figures._REUSED.clear()
    fresh_b = disks.three_views(ctx, ds, b, None).svg
    assert "no writes in any view" not in fresh_a
    # b after a, and a after b: nothing of the other disk is left (lines, "no writes" text, legend).
    assert disks.three_views(ctx, ds, a, None).svg == fresh_a
    assert disks.three_views(ctx, ds, b, None).svg == fresh_b
    assert disks.three_views(ctx, ds, a, None).svg == fresh_a
    assert disks.read_sources(ctx, ds, a, None, "read_sources").svg == fresh_src_a
    assert fresh_a != fresh_b and "<path" in fresh_a


# -- the size of the page: compact path data, flat runs, shared glyphs, CSV not base64 ----------


def _absolute(d: str) -> list[tuple[float, float]]:
    """The points of an M/l/z path as absolute coordinates (the SVG rules for relative lines)."""
    pts: list[tuple[float, float]] = []
    for cmd, args in re.findall(r"([Mlz])([^Mlz]*)", d):
        nums = [float(x) for x in re.findall(r"-?(?:\d+\.?\d*|\.\d+)", args)]
        if cmd == "M":
            pts.append((nums[0], nums[1]))
        elif cmd == "l":
            for dx, dy in zip(nums[::2], nums[1::2]):
                pts.append((pts[-1][0] + dx, pts[-1][1] + dy))
    return pts


def test_path_data_is_relative_and_adds_up_to_the_points():
    rng = np.random.default_rng(1)
    xy = np.cumsum(rng.uniform(-30, 30, size=(2000, 2)), axis=0) + 500
    codes = np.full(2000, Path.LINETO, dtype=np.uint8)
    codes[0] = codes[1000] = Path.MOVETO  # two subpaths (a gap in the data)
    d = figures.path_data(xy, codes)
    assert d.count("M") == 2 and "L" not in d and "\n" not in d
    got = np.array(_absolute(d))
    # Each point within half a tenth of a point of the true one: rounded, then differenced, no drift.
    assert got.shape == xy.shape and np.abs(got - xy).max() <= 0.05 + 1e-9
    old = " ".join(f"L {x:.1f} {y:.1f}" for x, y in xy)  # what matplotlib writes (with one decimal)
    assert len(d) < 0.7 * len(old)
    closed = figures.path_data(
        np.array([[0, 0], [10, 0], [10, 10], [0, 0]], float),
        np.array([Path.MOVETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY], np.uint8),
    )
    assert closed == "M0 0l10 0 0 10z"
    curve = np.array([Path.MOVETO, Path.CURVE3, Path.CURVE3], np.uint8)
    assert figures.path_data(np.zeros((3, 2)), curve) is None  # left to matplotlib's writer


def test_flat_runs_keep_their_ends_and_a_stack_keeps_any_layer_change():
    y = np.array([1, 1, 1, 1, 2, 2, np.nan, np.nan, np.nan, 3, 3, 3])
    assert figures.flat_index(y).tolist() == [0, 3, 4, 5, 6, 8, 9, 11]
    stack = np.vstack([np.ones(6), [1, 1, 2, 2, 2, 2]])
    assert figures.flat_index(stack).tolist() == [0, 1, 2, 5]
    assert figures.thin_index(y, 700).tolist() == [0, 3, 4, 5, 6, 8, 9, 11]


def test_figure_svg_is_compact_and_its_glyphs_are_shared_by_the_page():
    ctx, ds = _dataset()
    figures._REUSED.clear()
    f1 = disks.three_views(ctx, ds, ("vm-a", "scsi0:1"), None)
    f2 = disks.three_views(ctx, ds, ("vm-b", "scsi0:1"), None)
    for f in (f1, f2):
        assert "<!--" not in f.svg and "\n" not in f.svg and '<g id="' not in f.svg
        assert 'transform="scale(0.015625)"' in f.svg  # its glyphs, before the page takes them
    sprite = shared_glyphs([Section("a", "A", figures=[f1, Figure("e", "empty")]), Section("b", "B", figures=[f2])])
    assert sprite.startswith('<svg class="glyphs"') and 'transform="scale(0.015625)"' in sprite
    for f in (f1, f2):
        assert 'transform="scale(0.015625)"' not in f.svg and "<defs></defs>" not in f.svg
    used = set(re.findall(r'xlink:href="#([^"]+)"', f1.svg + f2.svg))
    defined = set(re.findall(r'id="([^"]+)"', sprite + f1.svg + f2.svg))
    assert used <= defined, used - defined  # every glyph drawn is defined once
    assert len(re.findall(r'<path id="', sprite)) == len(set(re.findall(r'<path id="([^"]+)"', sprite)))


def test_csv_data_uri_round_trips_without_base64():
    for text in ('time,unix,"a,b"\n2026-01-01T00:00:00Z,1,1.5e+07,,-3\n', "50 % # & <x> é\n"):
        uri = data_uri(text)
        assert uri.startswith("data:text/csv;charset=utf-8,") and "base64" not in uri
        assert not any(c in uri for c in ' "<>#&\n')
        assert urllib.parse.unquote(uri.split(",", 1)[1]) == text


def test_text_kept_across_figures_draws_the_same_svg(monkeypatch):
    # Text measured and laid out once for every figure (figures._text_metrics, _cached_glyphs_with_font)
    # gives the same bytes as matplotlib laying it out anew in each figure.
    from matplotlib import text as mtext, textpath

    ctx, ds = _dataset(721)
    key = ("vm-a", "scsi0:1")
    figures._REUSED.clear()
    disks.three_views(ctx, ds, key, None)  # the caches filled by another figure first
    cached = disks.three_views(ctx, ds, key, None).svg
    assert mtext._get_text_metrics_with_cache is figures._text_metrics
    monkeypatch.setattr(mtext, "_get_text_metrics_with_cache", figures._figure_text_metrics)
    monkeypatch.setattr(textpath.TextToPath, "get_glyphs_with_font", figures._glyphs_with_font)
    figures._REUSED.clear()
    assert disks.three_views(ctx, ds, key, None).svg == cached


@pytest.mark.parametrize("n, workers", [(100, 2), (7, 2), (4, 4), (1000, 8)])
def test_pages_are_shared_out_largest_first_and_one_by_one_at_the_end(n, workers):
    keys = [(f"vm-{i:03d}", "scsi0:1") for i in range(n)]
    chunks = disks.guided(keys, workers)
    assert [k for c in chunks for k in c] == keys  # every page once, in page order
    sizes = [len(c) for c in chunks]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1
    assert sizes[0] == max(1, n // (4 * workers))  # the first hand-over is a quarter of a worker's share
    assert sum(1 for s in sizes if s == 1) >= min(n, 2 * workers)  # the tail: single pages


def test_series_csv_cells_are_six_significant_digits_and_empty_for_nan():
    times = T0 + 5 * np.arange(4)
    a = np.array([1234567.0, np.nan, 0.5, -2e-7])
    b = np.array([np.nan, np.nan, 3.0, np.inf])
    text = figures.series_csv(times, {"a": a, "b,c": b})
    lines = text.splitlines()
    assert lines[0] == 'time,unix,a,"b,c"'
    # The row where every series is empty is left out; NaN is an empty cell, never "nan".
    assert lines[1:] == [
        f"{np.datetime_as_string(np.datetime64(int(T0), 's'))}Z,{T0:.0f},1.23457e+06,",
        f"{np.datetime_as_string(np.datetime64(int(T0) + 10, 's'))}Z,{T0 + 10:.0f},0.5,3",
        f"{np.datetime_as_string(np.datetime64(int(T0) + 15, 's'))}Z,{T0 + 15:.0f},-2e-07,inf",
    ]
    assert text.endswith("\n") and "nan" not in text
    assert figures.series_csv(times, {"a": np.full(4, np.nan)}) == "time,unix,a\n"


def test_series_csv_header_round_trips_any_series_name():
    """A series named by a label value may hold a quote, comma or line break: csv.reader gives the
    names back (before, a quote was not doubled and the header split wrongly)."""
    import csv
    import io

    names = ['vm "db" 1', "a,b", "two\nlines", 'both," and ,']
    text = figures.series_csv(T0 + 5 * np.arange(2), {n: np.array([1.0, 2.0]) for n in names})
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["time", "unix", *names]
    assert [len(r) for r in rows] == [6, 6, 6]


# -- svgcache: ticks, axes, texts, legends and patches written again from kept SVG ---------------


def _placed(svg: str) -> list[tuple[str, float, float]]:
    """Every ``<use>`` of the SVG (tick marks, glyphs) with the place it is drawn at, the transforms
    of its groups applied: (what it draws, x, y), sorted."""
    import xml.etree.ElementTree as ET

    def matrix(text: str) -> np.ndarray:
        m = np.eye(3)
        for op, args in re.findall(r"(\w+)\(([^)]*)\)", text or ""):
            v = [float(a) for a in args.replace(",", " ").split()]
            t = np.eye(3)
            if op == "translate":
                t[0, 2], t[1, 2] = v[0], v[1] if len(v) > 1 else 0.0
            elif op == "scale":
                t[0, 0], t[1, 1] = v[0], v[1] if len(v) > 1 else v[0]
            else:
                raise AssertionError(f"unexpected transform {op}")
            m = m @ t
        return m

    out: list[tuple[str, float, float]] = []

    def walk(el, m: np.ndarray) -> None:
        m = m @ matrix(el.get("transform", ""))
        if el.tag.endswith("use"):
            href = el.get("{http://www.w3.org/1999/xlink}href")
            x, y, _ = m @ np.array([float(el.get("x", 0)), float(el.get("y", 0)), 1.0])
            out.append((href, float(x), float(y)))
        for child in el:
            if not child.tag.endswith("defs"):
                walk(child, m)

    walk(ET.fromstring(svg), np.eye(3))
    return sorted(out)


def _references_resolve(svg: str) -> None:
    defined = set(re.findall(r'id="([^"]+)"', svg))
    used = set(re.findall(r"url\(#([^)]+)\)", svg)) | set(re.findall(r'xlink:href="#([^"]+)"', svg))
    assert used <= defined, used - defined


def test_kept_svg_draws_every_tick_label_and_legend_where_matplotlib_does(monkeypatch):
    from matplotlib import axis as maxis, legend as mlegend, patches as mpatches, text as mtext

    from ioparallax.report import svgcache

    ctx, ds = _dataset()
    a, b = ("vm-a", "scsi0:1"), ("vm-b", "scsi0:1")
    figures._REUSED.clear()
    # b first: a's ticks, texts and legends are then written from what b's figure kept (the value
    # ticks at other heights: moved), twice, so that the second comes from the kept legends.
    disks.three_views(ctx, ds, b, None)
    disks.read_sources(ctx, ds, b, None, "read_sources")
    kept = [disks.three_views(ctx, ds, a, None).svg, disks.read_sources(ctx, ds, a, None, "read_sources").svg]
    kept_again = [disks.three_views(ctx, ds, a, None).svg, disks.read_sources(ctx, ds, a, None, "read_sources").svg]
    assert kept_again == kept
    # b's axes without writes have only grid lines (kept) inside them: their clip is the kept one's.
    _references_resolve(disks.three_views(ctx, ds, b, None).svg)
    assert 'transform="translate(' in kept[0]  # value ticks were moved from where they were kept
    for cls, name, own in (
        (maxis.Tick, "draw", svgcache._tick_draw),
        (maxis.Axis, "draw", svgcache._axis_draw),
        (mlegend.Legend, "draw", svgcache._legend_draw),
        (mtext.Text, "draw", svgcache._text_draw),
        (mpatches.Patch, "draw", svgcache._patch_draw),
    ):
        monkeypatch.setattr(cls, name, own)
    figures._REUSED.clear()
    plain = [disks.three_views(ctx, ds, a, None).svg, disks.read_sources(ctx, ds, a, None, "read_sources").svg]
    for k, p in zip(kept, plain):
        _references_resolve(k)  # clip rectangles, hatch patterns, tick marks and glyphs it uses
        got, want = _placed(k), _placed(p)
        assert len(got) == len(want) > 100
        # The same tick marks and glyphs at the same places, to a fifth of a point: matplotlib
        # rounds each place to a tenth, the kept SVG its place and its move.
        for href, x, y in got:
            match = next((w for w in want if w[0] == href and abs(w[1] - x) <= 0.2 and abs(w[2] - y) <= 0.2), None)
            assert match is not None, (href, x, y)
            want.remove(match)
        assert len(re.findall(r'clip-path="url\(#', k)) == len(re.findall(r'clip-path="url\(#', p))


def test_stacked_areas_are_the_svg_of_stackplot(monkeypatch):
    # figures.stack makes fill_between's polygons itself: the bytes of matplotlib's stackplot.
    ctx, ds = _dataset()
    wave = 3e6 * (1 + np.sin(np.arange(120) / 5))  # a layer that is not flat, above a hatched one
    ds.labelled["read_sources"].append(({"vdisk_id": "1", "source": "cache_dram"}, wave))
    a = ("vm-a", "scsi0:1")
    figures._REUSED.clear()
    ours = disks.read_sources(ctx, ds, a, None, "read_sources").svg
    monkeypatch.setattr(
        disks,
        "stack",
        lambda ax, x, ys, colors, labels, alpha: ax.stackplot(x, *ys, colors=colors, labels=labels, alpha=alpha),
    )
    figures._REUSED.clear()
    assert disks.read_sources(ctx, ds, a, None, "read_sources").svg == ours
    assert ours.count("url(#h") >= 2  # the zero bucket hatched, in the area and its legend handle
