"""The report as one self-contained HTML page: inline CSS, inline SVG figures, the data behind each
figure as a CSV ``data:`` link, no script and no external resource (nothing is fetched when it is
opened). Print CSS: A4 landscape, a page per VM disk."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import asdict
from datetime import UTC, datetime

from ioparallax.report.analysis import Side, vm_view_words
from ioparallax.report.context import ReportContext
from ioparallax.report.sections import Figure, Section, esc
from ioparallax.report.verdicts import si_bytes

CSS = """
:root { --ok:#2e7d32; --ok-bg:#e8f5e9; --bad:#c62828; --bad-bg:#ffebee; --nm:#616161; --nm-bg:#eeeeee;
        --ink:#212121; --muted:#616161; --line:#d0d0d0; }
* { box-sizing: border-box; }
body { font: 13px/1.45 "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: var(--ink); margin: 0 auto;
       max-width: 1280px; padding: 18px 24px 40px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 26px 0 8px; padding-bottom: 4px; border-bottom: 2px solid var(--ink); }
h3 { font-size: 14px; margin: 16px 0 6px; }
a { color: #0d47a1; }
.meta { color: var(--muted); margin: 0 0 10px; }
.meta b { color: var(--ink); font-weight: 600; }
nav.toc { columns: 3; font-size: 12px; margin: 8px 0 4px; }
nav.toc a { display: block; text-decoration: none; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; }
th, td { border: 1px solid var(--line); padding: 5px 6px; vertical-align: top; text-align: left; }
thead th { background: #f5f5f5; font-size: 12px; }
thead th a { color: var(--ink); }
table.verdicts td.v { width: 12.5%; font-size: 11px; }
table.verdicts th.disk { font-size: 12px; white-space: nowrap; }
td.v .state { display: block; font-weight: 700; font-size: 12.5px; }
td.v .num { display: block; font-weight: 600; font-size: 12px; margin: 1px 0; word-break: break-word; }
td.v .thr, th .thr { display: block; color: var(--muted); font-size: 10px; font-weight: normal; }
td.v .why { display: block; margin-top: 3px; color: #424242; }
td.ok { background: var(--ok-bg); } td.ok .state { color: var(--ok); }
td.distorted { background: var(--bad-bg); } td.distorted .state { color: var(--bad); }
td.nm { background: var(--nm-bg); } td.nm .state { color: var(--nm); }
.pill { display: inline-block; padding: 1px 8px; border-radius: 9px; font-weight: 600; }
.pill.ok { background: var(--ok-bg); color: var(--ok); }
.pill.distorted { background: var(--bad-bg); color: var(--bad); }
.pill.nm { background: var(--nm-bg); color: var(--nm); }
.missing { border-left: 4px solid #f9a825; background: #fffde7; padding: 6px 12px; margin: 8px 0; }
.missing p { margin: 2px 0; } .missing ul { margin: 2px 0 4px; padding-left: 20px; }
.error { color: var(--bad); }
.note, .src, .caption { color: var(--muted); font-size: 11.5px; }
table.identity { width: auto; min-width: 60%; }
table.identity th { background: #fafafa; white-space: nowrap; }
.nm-text { color: var(--nm); font-style: italic; }
figure { margin: 10px 0 16px; break-inside: avoid; page-break-inside: avoid; }
figure svg { display: block; max-width: 100%; height: auto; }
figure.empty .placeholder { border: 1px dashed var(--line); color: var(--muted); padding: 18px; text-align: center; }
figcaption { color: var(--muted); font-size: 11.5px; margin-top: 2px; }
figcaption .dl { margin-left: 6px; }
pre.promql { white-space: pre-wrap; word-break: break-all; background: #f7f7f7; border: 1px solid #eee;
             padding: 4px 6px; font-size: 10.5px; margin: 2px 0 6px; }
table.kv { width: auto; } table.kv td, table.kv th { font-size: 12px; }
section.disk { break-before: page; page-break-before: always; }
@page { size: A4 landscape; margin: 10mm; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  nav.toc { display: none; }
  a { color: inherit; text-decoration: none; }
  h2 { margin-top: 0; break-after: avoid; page-break-after: avoid; }
  thead { display: table-header-group; }
  tr { break-inside: avoid; page-break-inside: avoid; }
  section.appendix { break-before: page; page-break-before: always; }
  figure svg { width: auto; max-width: 100%; max-height: 165mm; margin: 0 auto; }
  figure.tall svg { max-height: 150mm; }
  /* The application's scalability figure and the I/O views' beside it: one printed page for both. */
  figure#scalability-app svg, figure#scalability-app + figure svg { max-height: 78mm; }
  table.verdicts td.v { font-size: 9.5px; }
  td.v .why { margin-top: 2px; }
}
"""


# Characters that stay as they are in a data: URL inside a double-quoted attribute; every other
# ASCII character is percent-encoded (the newline too: browsers drop newlines from URLs).
_URL_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~,:;+=/*!()@$'")
_URL_KEEP_BYTES = "".join(sorted(_URL_KEEP)).encode()


def data_uri(text: str, mime: str = "text/csv") -> str:
    """A ``data:`` URL of the text, percent-encoded: a CSV is digits and commas, kept as they are
    (base64 made every file a third larger)."""
    if text.isascii():
        # str.replace per character present (a CSV has newlines and maybe quotes): ten times faster
        # than str.translate on the hundreds of kB of a disk's data.
        unsafe = set(text.encode().translate(None, _URL_KEEP_BYTES).decode())  # bytes.translate: C speed
        for c in sorted(unsafe, key=lambda c: c != "%"):  # "%" first
            text = text.replace(c, f"%{ord(c):02X}")
        return f"data:{mime};charset=utf-8,{text}"
    return f"data:{mime};charset=utf-8,{urllib.parse.quote(text, safe=''.join(sorted(_URL_KEEP)))}"


_GLYPH = re.compile(r'<path id="([^"]+)"(?: d="[^"]*")? transform="scale\(0\.015625\)"/>')  # a space has no d


def shared_glyphs(sections: list[Section]) -> str:
    """The glyphs of every figure's text, once: matplotlib defines in each figure the glyphs its
    labels use (a fifth of a figure's bytes), under ids that name the font and the character, the
    same in every figure. They move to one hidden ``<svg>`` at the top of the page, which every
    figure's ``<use>`` refers to (an id is the page's, not the figure's)."""
    glyphs: dict[str, str] = {}

    def take(m: re.Match) -> str:
        glyphs.setdefault(m.group(1), m.group())
        return ""

    for s in sections:
        for f in s.figures:
            if f.svg:
                f.svg = _GLYPH.sub(take, f.svg).replace("<defs></defs>", "")
    if not glyphs:
        return ""
    return (
        '<svg class="glyphs" width="0" height="0" style="position:absolute" aria-hidden="true"><defs>'
        + "".join(glyphs.values())
        + "</defs></svg>"
    )


def render_figure(f: Figure) -> str:
    # The CSV itself is embedded once, in the appendix; the caption links there.
    dl = f'<a class="dl" href="#data-{esc(f.id)}">data (CSV)</a>' if f.csv else ""
    if not f.svg:
        return (
            f'<figure class="empty" id="{esc(f.id)}"><div class="placeholder">No figure</div>'
            f"<figcaption>{esc(f.caption)}{dl}</figcaption></figure>"
        )
    return f'<figure id="{esc(f.id)}">{f.svg}<figcaption>{esc(f.caption)}{dl}</figcaption></figure>'


def render_section(s: Section) -> str:
    cls = "disk" if s.page_break else "plain"
    figs = "".join(render_figure(f) for f in s.figures)
    return f'<section class="{cls}" id="{esc(s.id)}"><h2>{esc(s.title)}</h2>{s.html}{figs}</section>'


def appendix(ctx: ReportContext, sections: list[Section], versions: dict[str, str], queries: int) -> str:
    cfg = ctx.config
    parts = ['<section class="appendix" id="appendix"><h2>Appendix</h2>']
    parts.append(
        "<h3>How the numbers are made</h3><p>Every verdict is judged over the whole range "
        f"({ctx.range_seconds} s, one point every {ctx.step:g} s), on the steps where the disk is busy "
        f"(above thresholds.busy_bytes_per_second, as the alerts gate): <b>views agree</b> is the ratio of "
        f"the guest's (and the storage's) mean byte rate to the VM's; <b>zero reads / writes</b> and "
        f"<b>cache fit</b> are the mean of the share rule while the vdisk is busy in that direction, with "
        f"the largest working-set-to-cache ratio of the range; <b>bursts</b> is Little's law over the "
        f"range: the mean asked queue depth over the mean outstanding I/Os the VM view implies; "
        f"<b>misalignment</b> is the guest's partition offsets, else the storage's read-modify-write "
        f"share on write-only steps; <b>hygiene</b> is every fio hygiene problem seen in the range. "
        f"A value strictly above its threshold is Distorted, as in the alerts. See docs/report.md.</p>"
    )
    t = asdict(cfg.thresholds)
    rows = "".join(f"<tr><th>thresholds.{esc(k)}</th><td>{esc(_number(k, v))}</td></tr>" for k, v in t.items())
    rows += "".join(f"<tr><th>windows.{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in asdict(cfg.windows).items())
    rows += "".join(f"<tr><th>selectors.{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in asdict(cfg.selectors).items())
    parts.append(
        f"<h3>Config used</h3><p class='note'>From {esc(cfg.path)}: the same values the alerts and "
        f"dashboards are generated from.</p><table class='kv'><tbody>{rows}</tbody></table>"
    )
    vrows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in versions.items())
    parts.append(f"<h3>Versions</h3><table class='kv'><tbody>{vrows}</tbody></table>")
    parts.append(
        f"<h3>Queries and data</h3><p class='note'>{queries} Prometheus queries made this report, one "
        f"per kind of series over every VM disk (not one per disk).</p>"
    )
    for s in sections:
        items = []
        for f in s.figures:
            dl = (
                f' <a download="{esc(f.id)}.csv" href="{data_uri(f.csv)}">{esc(f.id)}.csv</a>'
                if f.csv
                else " (no data)"
            )
            q = "".join(f'<pre class="promql">{esc(e)}</pre>' for e in f.promql)
            items.append(f'<h4 id="data-{esc(f.id)}"><a href="#{esc(f.id)}">{esc(f.id)}</a>{dl}</h4>{q}')
        for name, text in s.csv.items():
            items.append(f'<p><a download="{esc(name)}" href="{data_uri(text)}">{esc(name)}</a></p>')
        if s.promql and not s.figures:
            items.append("".join(f'<pre class="promql">{esc(e)}</pre>' for e in s.promql))
        elif s.promql:
            items.append(
                "<p class='note'>Tables of this section:</p>"
                + "".join(f'<pre class="promql">{esc(e)}</pre>' for e in s.promql)
            )
        if items:
            parts.append(f"<h3>{esc(s.title)}</h3>" + "".join(items))
    parts.append("</section>")
    return "".join(parts)


def _number(key: str, v: float) -> str:
    text = f"{int(v):,}" if float(v).is_integer() and abs(v) >= 1000 else f"{v:g}"
    return f"{text} ({si_bytes(v)})" if "bytes" in key else text


def fmt_utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def render_parts(
    a: Side,
    b: Side | None,
    title: str,
    sections: list[Section],
    versions: dict[str, str],
    queries: int,
    generated: float,
) -> list[str]:
    """The page of side ``a`` (and ``b``, --compare) as a list of pieces, to be written one after the
    other: a report of a hundred VM disks is tens of megabytes, and joining it would hold it twice
    in memory."""
    ctx, missing_views = a.ctx, a.data.missing_views
    missing = (" <b>Views missing:</b> " + esc(", ".join(missing_views))) if missing_views else ""
    vm_view = f" &middot; <b>VM view</b> {esc(vm_view_words(a.data))}"
    meta = (
        f'<p class="meta"><b>Range</b> {esc(fmt_utc(ctx.start))} to {esc(fmt_utc(ctx.end))} '
        f"({esc(_dur(ctx.range_seconds))}, a point every {ctx.step:g} s) &middot; <b>Prometheus</b> "
        f"{esc(ctx.api.url)}"
        + (f" &middot; <b>match</b> {{{esc(ctx.match)}}}" if ctx.match else "")
        + vm_view
        + (
            f" &middot; <b>compared with</b> {esc(b.ctx.label)}: {esc(b.ctx.api.url)}"
            + (f" {{{esc(b.ctx.match)}}}" if b.ctx.match != ctx.match else "")
            + f" {esc(fmt_utc(b.ctx.start))} to {esc(fmt_utc(b.ctx.end))}"
            + f" (VM view {esc(vm_view_words(b.data))})"
            if b is not None
            else ""
        )
        + f" &middot; generated {esc(fmt_utc(generated))}.{missing}</p>"
    )
    intro = (
        "<p>Each VM disk is seen three times: by the guest (fio), by the VM (vCenter on ESXi, Prism on AHV: "
        "each disk's page says which, with its sample period) and by the storage "
        "(Stargate). A cell says whether the numbers of that disk can be trusted for that trap: "
        "<b>OK</b>, <b>Distorted</b> (the benchmark measures something else than the application will get) "
        'or <b>Not measurable</b> (a view or a counter needed to tell is missing: this is not "OK").</p>'
    )
    toc = "".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in sections if s.toc)
    glyphs = shared_glyphs(sections)
    head = (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        f'img-src data:">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{glyphs}"
        f"<header><h1>{esc(title)}</h1>{meta}{intro}</header>"
        f'<nav class="toc">{toc}<a href="#appendix">Appendix</a></nav>'
    )
    return [
        head,
        *(render_section(s) for s in sections),
        appendix(ctx, sections, versions, queries),
        "</body></html>\n",
    ]


def _dur(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"
