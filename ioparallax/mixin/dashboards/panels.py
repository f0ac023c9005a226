"""Panel builders shared by the ioparallax dashboards (grafana-foundation-sdk).

Every panel queries the ``$datasource`` variable, carries a unit and a description, and gets a
stable id from its position, so regenerating gives the same JSON.
"""

from __future__ import annotations

from dataclasses import dataclass

from grafana_foundation_sdk.builders import (
    common as cb,
    dashboard as db,
    heatmap,
    heatmap as hb,
    prometheus,
    stat,
    table,
    text,
    timeseries,
)
from grafana_foundation_sdk.models import common as cm, dashboard as dm, heatmap as hm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat
from grafana_foundation_sdk.models.text import TextMode

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Colours of the storage's zero buckets and of the three layers, the same on every dashboard.
ZERO_COLOR = "red"
LAYER_COLORS = {"guest": "green", "VM": "blue", "storage": "orange"}


@dataclass(frozen=True)
class Q:
    """One PromQL query of a panel: expression, legend, and whether it is an instant query."""

    expr: str
    legend: str = ""
    instant: bool = False
    fmt: str = "time_series"  # time_series | table | heatmap
    min_step: str = ""  # the query's Min step; Grafana's $__rate_interval is then >= 4x it


def _target(q: Q, ref: str) -> prometheus.Dataquery:
    t = (
        prometheus.Dataquery()
        .expr(q.expr)
        .ref_id(ref)
        .datasource(DATASOURCE)
        .legend_format(q.legend or "__auto")
        .format(PromQueryFormat(q.fmt))
    )
    if q.min_step:
        t.interval(q.min_step)
    return t.instant() if q.instant else t.range()


def _common(panel, title: str, description: str, unit: str, queries: list[Q], w: int, h: int):
    panel.title(title).description(description).datasource(DATASOURCE).unit(unit).span(w).height(h)
    for i, q in enumerate(queries):
        panel.with_target(_target(q, chr(ord("A") + i)))
    return panel


def thresholds(limit: float | None, above: str = "red") -> db.ThresholdsConfig:
    steps = [dm.Threshold(value=None, color="green")]
    if limit is not None:
        steps.append(dm.Threshold(value=limit, color=above))
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps)


def ts(
    title: str,
    description: str,
    unit: str,
    queries: list[Q],
    *,
    w: int = 12,
    h: int = 8,
    stack: bool = False,
    limit: float | None = None,
    min0: bool = True,
    colors: dict[str, str] | None = None,
    regex_colors: dict[str, str] | None = None,
    dashed: list[str] | None = None,
    no_value: str | None = None,
) -> timeseries.Panel:
    """A time series panel. ``limit`` draws the alert threshold as a dashed line; ``colors``
    fixes a colour per series name (legend); ``regex_colors`` per series-name regex (the zero
    buckets); ``dashed`` names series drawn dashed (the averaged views beside the raw ones);
    ``no_value`` is the text shown when no query has data (say why it can be empty)."""
    p = _common(timeseries.Panel(), title, description, unit, queries, w, h)
    if no_value:
        p.no_value(no_value)
    p.line_width(1).fill_opacity(10 if not stack else 60).show_points(cm.VisibilityMode.NEVER)
    p.legend(
        cb.VizLegendOptions()
        .display_mode(cm.LegendDisplayMode.TABLE)
        .placement(cm.LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(["lastNotNull", "mean", "max"])
    )
    p.tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
    if min0:
        p.min(0)
    if stack:
        p.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL))
    p.thresholds(thresholds(limit))
    if limit is not None:
        p.thresholds_style(cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.DASHED))
    for name, color in sorted((colors or {}).items()):
        p.override_by_name(name, [dm.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": color})])
    for regex, color in sorted((regex_colors or {}).items()):
        p.override_by_regexp(
            regex,
            [
                dm.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": color}),
                dm.DynamicConfigValue(id_val="custom.fillOpacity", value=90),
            ],
        )
    for regex in dashed or []:
        p.override_by_regexp(
            regex, [dm.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]})]
        )
    return p


def tbl(
    title: str,
    description: str,
    unit: str,
    exprs: list[str],
    *,
    w: int = 24,
    h: int = 8,
    hide: tuple[str, ...] = ("Time", "__name__"),
) -> table.Panel:
    """A table of the instant values of ``exprs`` (one row a series; several merged); ``hide``
    drops columns."""
    queries = [Q(x, instant=True, fmt="table") for x in exprs]
    p = _common(table.Panel(), title, description, unit, queries, w, h)
    p.with_transformation(
        dm.DataTransformerConfig(id_val="organize", options={"excludeByName": dict.fromkeys(hide, True)})
    )
    if len(queries) > 1:
        p.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
    return p


def single(
    title: str,
    description: str,
    unit: str,
    queries: list[Q],
    *,
    w: int = 6,
    h: int = 4,
    limit: float | None = None,
    above: str = "red",
) -> stat.Panel:
    p = _common(stat.Panel(), title, description, unit, queries, w, h)
    p.color_mode(cm.BigValueColorMode.BACKGROUND).graph_mode(cm.BigValueGraphMode.AREA)
    p.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    p.thresholds(thresholds(limit, above))
    return p


def labelled(
    title: str,
    description: str,
    unit: str,
    queries: list[Q],
    texts: dict[float, tuple[str, str]],
    *,
    no_value: str,
    w: int = 3,
    h: int = 8,
    limit: float | None = None,
) -> stat.Panel:
    """A stat whose special values read as words: ``texts`` maps a value to (text, colour), e.g. a
    0/1 flag to "not measurable" / "measurable"; ``no_value`` says why the panel can be empty;
    ``limit`` turns other values red from there on."""
    p = _common(stat.Panel(), title, description, unit, queries, w, h)
    p.color_mode(cm.BigValueColorMode.BACKGROUND).graph_mode(cm.BigValueGraphMode.NONE)
    p.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    p.thresholds(thresholds(limit))
    p.mappings(
        [
            dm.ValueMap(
                options={
                    f"{v:g}": dm.ValueMappingResult(text=text, color=color, index=i)
                    for i, (v, (text, color)) in enumerate(sorted(texts.items()))
                }
            )
        ]
    )
    p.no_value(no_value)
    return p


def heat(title: str, description: str, unit: str, query: Q, *, w: int = 12, h: int = 8) -> heatmap.Panel:
    """A heatmap of a histogram's ``le`` buckets (query format ``heatmap``: Grafana de-accumulates)."""
    p = _common(heatmap.Panel(), title, description, unit, [query], w, h)
    p.calculate(False)
    p.y_axis(hb.YAxisConfig().unit(unit))
    p.color(
        hb.HeatmapColorOptions()
        .mode(hm.HeatmapColorMode.SCHEME)
        .scheme("Oranges")
        .scale(hm.HeatmapColorScale.EXPONENTIAL)
        .exponent(0.5)
        .steps(64)
    )
    p.cell_values(hb.CellValues().unit("short"))
    p.rows_frame(hb.RowsHeatmapOptions().layout(cm.HeatmapCellLayout.LE))
    return p


def note(title: str, description: str, markdown: str, *, w: int = 12, h: int = 6) -> text.Panel:
    """A text panel (no query, so no unit)."""
    return (
        text.Panel()
        .title(title)
        .description(description)
        .mode(TextMode.MARKDOWN)
        .content(markdown.strip() + "\n")
        .span(w)
        .height(h)
    )


def row(title: str) -> db.Row:
    return db.Row(title)
