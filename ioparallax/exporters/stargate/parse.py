"""Stargate port-2009 pages -> typed records (pure functions, no I/O).

Tables are found by the text of their banner (main page) or heading (vdisk view), never by
position or tag; grouped two-row headers become ``Group - Leaf`` keys; blank cells are 0; row
labels of read sources and write destinations are data: known ones map to canonical names,
unknown ones keep their snake_case form. Units are converted to base units here (bytes, seconds,
ratios 0-1). Any malformed page raises :class:`StargatePageError`, and nothing else.

Parse coverage: whatever a page holds that the parse does not read (a table, a row, a column
it has no meaning for) is named in the record's ``unknown`` list as ``(table, kind, item)``, never
dropped silently (the probe counts them per probe and logs each once, target.py). Checking costs
next to nothing: the known vocabulary is compared where the parse already walks, and the column
names of a detail view's tables, the same on every page of a build, only on the pages asked for
(``check_headers``: one in DETAIL_BATCH, parsepool.py); their column counts on every page.

Values are validated here, at the edge: a cell that is not a finite, non-negative number of a
sane magnitude (``nan``, ``inf``, ``1e400``, ``-5``, a 400-digit number) is garbage. On the main
page it rejects its row (the vdisk is left out, the reason kept in ``MainPage.rejected``); on a
detail view it rejects the view (the vdisk's ``detail_up`` is 0). Every quantity on these pages
is a count, a size, a rate, a time or a percent, so none can be negative, and with non-negative
bucket counts a histogram never decreases.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from itertools import islice
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.etree

from ioparallax.exporters.stargate import strict as _strict
from ioparallax.exporters.stargate.records import (
    _HISTOGRAMS,
    _OPS_COLUMNS,
    _SECTION,
    _SOURCE_COLUMNS,
    _SOURCE_TABLES,
    _TD_END,
    _WINDOWS,
    DETAIL_SECTIONS as DETAIL_SECTIONS,
    KIB as KIB,
    LATENCY_BOUNDS as LATENCY_BOUNDS,
    LATENCY_LABELS as LATENCY_LABELS,
    MAX_VALUE as MAX_VALUE,
    MIB as MIB,
    SIZE_BOUNDS as SIZE_BOUNDS,
    SIZE_LABELS as SIZE_LABELS,
    SOURCE_NAMES as SOURCE_NAMES,
    Histogram as Histogram,
    StargatePageError as StargatePageError,
    Unknown as Unknown,
    VDiskDetail as VDiskDetail,
    _histogram_rows,
    _num,
    _ops_row,
    _wss_row,
)

log = logging.getLogger(__name__)

GIB = 1024**3


_LOCAL = threading.local()


def _parser() -> lxml.etree.HTMLParser:
    """One parser per thread: lxml parses without the GIL, but serialises the users of one
    parser object, so a shared parser would keep the probe's threads on one core."""
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = lxml.etree.HTMLParser(remove_comments=True, encoding="utf-8")
    return parser


ITEM_CHARS = 60


def _unknown(table: str, kind: str, item: str) -> Unknown:
    return (snake(table), kind, item[:ITEM_CHARS])


#: Sources/destinations that are zero suppression: no disk was touched.
ZERO_SOURCES = frozenset({"zero", "estore_zero", "oplog_zero"})


def snake(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_") or "unknown"


def canonical(label: str) -> str:
    key = " ".join(label.lower().split())
    return SOURCE_NAMES.get(key, snake(label))


def _text(el) -> str:
    t = (el.text or "") if len(el) == 0 else "".join(el.itertext())
    return " ".join(t.replace("\xa0", " ").split()) if t else ""


def _cells(row, n: int | None = None) -> list:
    """The first ``n`` (all if None) ``td`` children of a row: bar-graph cells after the values
    are never turned into Python objects."""
    if n is None:
        return list(row.iterchildren("td"))
    return list(islice(row.iterchildren("td"), n))


def _join(base_url: str, href: str) -> str:
    """``urljoin``, except that a malformed link (``http://[::1``) stays as written: whether it
    may be fetched is decided, with the reason, where links are followed (address.py)."""
    try:
        return urljoin(base_url, href)
    except ValueError:
        return href


def _link_joiner(base_url: str):
    """``urljoin(base_url, href)``, with a fast path for the usual root-relative link (a main
    page links a thousand vdisks)."""
    parts = urlsplit(base_url)
    origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""

    def join(href: str) -> str:
        if origin and href[:1] == "/" and href[1:2] != "/" and "/." not in href and "\\" not in href:
            return origin + href
        return _join(base_url, href)

    return join


def _parse_html(html: bytes):
    """The page's bytes as fetched, decoded by lxml's parser (UTF-8): never a str on the way."""
    if not html or not html.strip():
        raise StargatePageError("empty page")
    try:
        # Plain lxml.etree (not lxml.html's element classes): the same tree, a third cheaper.
        doc = lxml.etree.fromstring(html, _parser())
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError) as exc:
        raise StargatePageError(f"not HTML: {exc}") from None
    if doc is None or doc.find(".//table") is None:
        raise StargatePageError("no tables on the page (not a Stargate page, or cut off)")
    return doc


def _table_after(el):
    for nxt in el.itersiblings():
        if nxt.tag == "table":
            return nxt
        if nxt.tag not in ("br", "p", "div"):
            # A heading followed by something else: maybe the table is nested in it.
            inner = nxt.xpath(".//table")
            if inner:
                return inner[0]
    return None


def _banner_tables(doc, unclaimed: list | None = None) -> dict[str, Any]:
    """Banner title -> the data table that follows it. ``unclaimed``: filled with the tables
    that are neither a banner nor a banner's data table (nor inside one)."""
    out = {}
    seen = []
    banners = set()
    for t in doc.iter("table"):
        seen.append(t)  # holding the element keeps its id() its own
        rows = _rows(t)
        if len(rows) != 1:
            continue
        cells = _cells(rows[0], 2)
        if len(cells) == 1:
            banners.add(id(t))
            data = _table_after(t)
            if data is not None:
                out[_text(cells[0]).lower()] = data
    if unclaimed is not None and len(seen) > len(banners) + len(out):
        claimed = banners | {id(t) for t in out.values()}
        for t in seen:
            if id(t) not in claimed and not any(id(a) in claimed for a in t.iterancestors("table")):
                unclaimed.append(t)
    return out


def _rows(table) -> list:
    """The table's rows (``./tr|./tbody/tr`` in document order, without an XPath call)."""
    rows = []
    for child in table:
        if child.tag == "tr":
            rows.append(child)
        elif child.tag == "tbody":
            rows.extend(r for r in child if r.tag == "tr")
    return rows


def _colspan(th) -> int:
    span = (th.get("colspan") or "1").strip()
    return min(int(span), 100) if re.fullmatch(r"[0-9]{1,4}", span) and int(span) > 0 else 1


def _header_keys(table) -> tuple[list[str], list]:
    """Column keys of a table with a one- or two-row header, and its data rows."""
    rows = _rows(table)
    head = [r for r in rows if r.find("th") is not None and r.find("td") is None]
    data = [r for r in rows if r.find("td") is not None]
    if not head:
        return [], data
    top: list[str] = []
    for th in head[0].iterchildren("th"):
        top.extend([_text(th)] * _colspan(th))
    if len(head) == 1:
        return top, data
    leaves = [_text(th) for th in head[1].iterchildren("th")]
    keys = []
    for i, group in enumerate(top):
        leaf = leaves[i] if i < len(leaves) else ""
        keys.append(f"{group} - {leaf}" if leaf else group)
    return keys, data


# ----------------------------------------------------------------------------------- main page
@dataclass
class VDiskRow:
    vdisk_id: str
    name: str
    uuid: str
    href: str  # absolute URL of the vdisk's detail view (from the link)
    usage_bytes: float
    dedup_bytes: float
    oplog_bytes: float
    oplog_fragments: float
    oplog_drain_ops_per_second: float
    oplog_drain_bytes_per_second: float
    outstanding_read_ops: float
    outstanding_read_bytes: float
    outstanding_write_ops: float
    outstanding_write_bytes: float
    outstanding_estore_ops: float
    read_ops_per_second: float
    write_ops_per_second: float
    error_ops_per_second: float
    random_ops_per_second: float
    read_bytes_per_second: float
    write_bytes_per_second: float
    latency_seconds: float
    op_size_bytes: float
    queue_length: float
    busy_ratio: float


@dataclass
class MainPage:
    overview: dict[str, str]
    cvm_urls: list[str]  # every CVM of the cluster (Cluster State links)
    vdisks: list[VDiskRow]
    hosted_title: str  # "Hosted VDisks" or "Hosted Active VDisks" (2014)
    rejected: list[str] = field(default_factory=list)  # rows left out as garbage, with the reason
    unknown: list[Unknown] = field(default_factory=list)  # what the parse does not read (module doc)


#: Main-page tables by banner: read, or known and deliberately not read (NFS Worker: the same
#: vdisks as Hosted VDisks, by name). Any other banner is an unknown table.
MAIN_TABLES = frozenset({"overview", "cluster state", "nfs worker", "hosted vdisks", "hosted active vdisks"})
#: Overview rows (keys lowercased): Build version and SVM id are exported; the others are known.
OVERVIEW_KEYS = frozenset(
    {
        "start time",
        "build version",
        "stargate handle",
        "svm id",
        "incarnation id",
        "content cache hits",
        "content cache memory usage (mb)",
        "qos queue (size/admitted)",
    }
)
CLUSTER_STATE_COLUMNS = frozenset({"svm id", "stargate handle", "disks"})
HOSTED_COLUMNS = (
    "VDisk Id",
    "VDisk Name",
    "Usage (GB)",
    "Dedup (GB)",
    "Oplog - KB",
    "Oplog - Fragments",
    "Oplog - Ops/s",
    "Oplog - KB/s",
    "Outstanding ops - Read",
    "Outstanding ops - Write",
    "Outstanding ops - Estore",
    "Ops/s - Read",
    "Ops/s - Write",
    "Ops/s - Error",
    "Ops/s - Random",
    "KB/s - Read",
    "KB/s - Write",
    "Avg latency (usec)",
    "Avg op size",
    "Avg qlen",
    "% busy",
)


def _outstanding(text: str, where: str) -> tuple[float, float]:
    """``count, sizeKB`` -> (count, bytes)."""
    t = text.strip()
    if not t:
        return 0.0, 0.0
    m = re.fullmatch(r"([0-9]{1,15})\s*,\s*([0-9]{1,15})\s*KB", t, re.ASCII)
    if not m:
        raise StargatePageError(f"{where}: expected 'count, sizeKB', got {text[:40]!r}")
    return float(m.group(1)), float(m.group(2)) * KIB


def parse_main_page(html: bytes, base_url: str) -> MainPage:
    doc = _parse_html(html)
    unclaimed: list = []
    banners = _banner_tables(doc, unclaimed)
    hosted_title = next((t for t in ("hosted vdisks", "hosted active vdisks") if t in banners), None)
    if hosted_title is None:
        raise StargatePageError("no 'Hosted VDisks' table found (page cut off, or not a Stargate main page)")
    unknown = [_unknown(title, "table", title) for title in banners if title not in MAIN_TABLES]
    for t in unclaimed:  # a data table no banner names
        prev = t.getprevious()
        title = _text(prev) if prev is not None and prev.tag not in ("table", "br") else ""
        unknown.append(_unknown(title or "untitled", "table", title or "(a table without a heading)"))
    overview: dict[str, str] = {}
    if "overview" in banners:
        for row in _rows(banners["overview"]):
            cells = _cells(row, 2)
            if len(cells) >= 2:
                key = _text(cells[0])
                overview[key] = _text(cells[1])
                if key.lower() not in OVERVIEW_KEYS:
                    unknown.append(_unknown("overview", "row", key))
    cvm_urls: list[str] = []
    if "cluster state" in banners:
        table = banners["cluster state"]
        for a in table.xpath(".//a[@href]"):
            cvm_urls.append(_join(base_url, a.get("href")))
        cluster_keys, _ = _header_keys(table)
        unknown.extend(
            _unknown("cluster state", "column", k) for k in cluster_keys if k.lower() not in CLUSTER_STATE_COLUMNS
        )
    keys, data = _header_keys(banners[hosted_title])
    idx = {k.lower(): i for i, k in enumerate(keys)}
    read = {k.lower() for k in HOSTED_COLUMNS}
    unknown.extend(_unknown("hosted vdisks", "column", k) for k in keys if k.lower() not in read)

    def col(name: str) -> int:
        i = idx.get(name.lower())
        if i is None:
            raise StargatePageError(f"Hosted VDisks table has no column {name!r} (columns: {', '.join(keys)})")
        return i

    c = {n: col(n) for n in HOSTED_COLUMNS}
    vdisks = []
    rejected: list[str] = []
    join = _link_joiner(base_url)
    for r, row in enumerate(data):
        cells = _cells(row)
        if len(cells) < len(keys):
            raise StargatePageError(
                f"Hosted VDisks row {r + 1} has {len(cells)} cells, expected {len(keys)} (page cut off?)"
            )
        try:
            vdisks.append(_hosted_row(cells, c, f"Hosted VDisks row {r + 1}", join))
        except StargatePageError as exc:
            rejected.append(str(exc))
            if exc.item:
                unknown.append(_unknown("hosted vdisks", "cell", exc.item))
    return MainPage(
        overview=overview,
        cvm_urls=cvm_urls,
        vdisks=vdisks,
        rejected=rejected,
        unknown=list(dict.fromkeys(unknown)),  # each once per page
        hosted_title="Hosted Active VDisks" if hosted_title == "hosted active vdisks" else "Hosted VDisks",
    )


_VDISK_ID = re.compile(r"[0-9]{1,19}", re.ASCII)


def _hosted_row(cells: list, c: dict[str, int], where: str, join) -> VDiskRow:
    txt = [_text(x) for x in cells]
    links = [a for a in cells[c["VDisk Id"]].iter("a") if a.get("href") is not None]
    vdisk_id = txt[c["VDisk Id"]]
    if not _VDISK_ID.fullmatch(vdisk_id) or not links:
        raise StargatePageError(f"{where}: VDisk Id {vdisk_id[:40]!r} is not a linked integer (1-19 ASCII digits)")
    where = f"{where} (vdisk {vdisk_id})"
    m = re.fullmatch(r"(.*?)\s*\(([0-9a-fA-F-]{36})\)", txt[c["VDisk Name"]])
    name, uuid = (m.group(1), m.group(2).lower()) if m else (txt[c["VDisk Name"]], "")
    n = lambda key: _num(txt[c[key]], where, key)  # noqa: E731
    rd_ops, rd_bytes = _outstanding(txt[c["Outstanding ops - Read"]], where)
    wr_ops, wr_bytes = _outstanding(txt[c["Outstanding ops - Write"]], where)
    return VDiskRow(
        vdisk_id=vdisk_id,
        name=name,
        uuid=uuid,
        href=join(links[0].get("href")),
        usage_bytes=n("Usage (GB)") * GIB,
        dedup_bytes=n("Dedup (GB)") * GIB,
        oplog_bytes=n("Oplog - KB") * KIB,
        oplog_fragments=n("Oplog - Fragments"),
        oplog_drain_ops_per_second=n("Oplog - Ops/s"),
        oplog_drain_bytes_per_second=n("Oplog - KB/s") * KIB,
        outstanding_read_ops=rd_ops,
        outstanding_read_bytes=rd_bytes,
        outstanding_write_ops=wr_ops,
        outstanding_write_bytes=wr_bytes,
        outstanding_estore_ops=n("Outstanding ops - Estore"),
        read_ops_per_second=n("Ops/s - Read"),
        write_ops_per_second=n("Ops/s - Write"),
        error_ops_per_second=n("Ops/s - Error"),
        random_ops_per_second=n("Ops/s - Random"),
        read_bytes_per_second=n("KB/s - Read") * KIB,
        write_bytes_per_second=n("KB/s - Write") * KIB,
        latency_seconds=n("Avg latency (usec)") / 1e6,
        op_size_bytes=n("Avg op size"),
        queue_length=n("Avg qlen"),
        busy_ratio=n("% busy") / 100,
    )


#: Banners of the detail view that hold no data (one-cell title tables).
DETAIL_BANNERS = frozenset({"vdisk stats"})


#: Cells of a row the detail view's parse reads at most (label and up to three values); the
#: content-less cells after them (the histograms' 20-cell bar graphs) are cut before lxml.
_LEADING_CELLS = 4
_TR_END = b"</tr>"
_WHITESPACE = b" \t\n\r\f"
#: One of a row's first four cells up to its ``</td>``: (a ``<tr>`` and) a ``<td>`` tag whose
#: attributes are quoted plainly, then text without markup or quotes.
_LEADING_CELL = re.compile(rb'\s*(?:<tr\s*>\s*)?<td(?:\s+[A-Za-z-]+(?:="[^"<>]*")?)*\s*>[^<>"\']*\Z')
#: A row's end that holds nothing but content-less cells: ``<td>`` tags with plainly quoted
#: attributes, each closed at once (whitespace between them aside).
_EMPTY_CELLS = re.compile(rb'(?:\s*<td(?:\s+[A-Za-z-]+(?:="[^"<>]*")?)*\s*>\s*</td>)+\s*')
#: A ``<`` that does not open (or close) a tag of the page's plain markup with quoted attributes,
#: nor is text (``< td>``): a comment, a raw-text element, an unclosed tag or quote anywhere puts the HTML
#: tokenizer in a state that can reach into a later row, so such a page is never cut.
_NOT_PLAIN_TAG = re.compile(
    rb"<(?!\s|/?(?:html|head|title|body|table|tbody|thead|tr|td|th|h[1-6]|br|font|b|i|a|p|hr|center|span|div)"
    rb'(?:\s+[A-Za-z-]+(?:="[^"]*")?)*\s*>)',
    re.IGNORECASE,
)
#: Shorter rows are never cut (a bar graph is ~400-700 bytes): their check would cost more than
#: parsing them.
_CUT_MIN_ROW = 256


def _cut_bar_graphs(html: bytes) -> bytes:
    """The page without the content-less cells that end its rows after their first four cells:
    the four histograms' 20-cell bar graphs are 640 of a detail view's ~985 elements, and lxml's
    parse costs about 4x more with them (docs/stargate.md, Cluster scale).

    Exact, not a guess at the bar graphs' markup: a row's end (from after its 4th ``</td>`` to its
    ``</tr>``) is removed only when, whitespace aside, it is nothing but ``<td ...></td>`` cells
    (every ``<`` and ``>`` is one of their tags' own, each ``</td>`` right after its ``<td ...>``):
    cells with no text, which the parse never reads (it reads a row's first three cells; the
    working set table's missing cells read as blank, i.e. 0). Anything else (text, another tag, a
    ``>`` in an attribute, ``</TR>``, a row without ``</tr>``, a leading cell that is not one
    ``<td`` closed by one ``</td>`` around plain text) leaves that row as it is, and a page with
    anything but plain tags (a comment, a script, a tag or quote left open anywhere: they change
    how the rows after them are read) is not cut at all, so a page
    in an unexpected dialect is parsed whole: slower, never different. All C-level bytes
    operations: ~0.15 ms a page against the ~0.9 ms it saves lxml."""
    rows = html.split(_TR_END)
    changed = False
    for i, row in enumerate(rows):
        if len(row) < _CUT_MIN_ROW:
            continue
        parts = row.split(_TD_END, _LEADING_CELLS)
        if len(parts) <= _LEADING_CELLS:
            continue
        # Each of the first four ``</td>`` must close a cell of its own, holding only text: a
        # stray ``</td>`` (which lxml ignores) would make the cut take cells the parse reads, and
        # a quote or tag opened in a cell's text ('<t a="...') would swallow what follows up to
        # the next quote, which the cut moves.
        if not all(_LEADING_CELL.match(part) for part in parts[:_LEADING_CELLS]):
            continue
        tail = parts[_LEADING_CELLS]
        if not _EMPTY_CELLS.fullmatch(tail):
            continue
        rows[i] = row[: len(row) - len(tail)]
        changed = True
    if not changed:
        return html
    cut = _TR_END.join(rows)
    # What was cut is whole plain tags; what is kept must be too, or the page is parsed whole.
    return html if _NOT_PLAIN_TAG.search(cut) else cut


_NOT_HEADINGS = frozenset({"table", "tbody", "tr", "td", "th", "br", "a"})


def _sections(doc) -> tuple[dict[str, tuple[str, Any]], int]:
    """Section name -> (vdisk id, its table), and how many tables the walk passed by."""
    out = {}
    tables = 0
    # Headings are outside tables: never descend into one (the bulk of the page is table cells,
    # most of them bar graphs). Document order, with an explicit stack (no recursion limit).
    stack = [doc]
    while stack:
        el = stack.pop()
        if len(el):
            n = len(stack)
            stack.extend(c for c in reversed(el) if isinstance(c.tag, str) and c.tag != "table")
            tables += len(el) - (len(stack) - n)  # children left out: tables (and comments, none)
            continue
        if el.tag in _NOT_HEADINGS:
            continue
        m = _SECTION.match(_text(el))
        if m:
            table = _table_after(el)
            if table is not None:
                out[m.group(2).lower()] = (m.group(1), table)
    return out, tables


def _unclaimed_tables(doc, claimed: set, unknown: list[Unknown]) -> None:
    """The tables of a detail view that no section heading names and that are not a known banner
    (only called when the walk passed by more tables than it found sections)."""
    for t in doc.iter("table"):
        if id(t) in claimed or any(id(a) in claimed for a in t.iterancestors("table")):
            continue
        rows = _rows(t)
        cells = _cells(rows[0], 2) if len(rows) == 1 else []
        if len(cells) == 1:  # a banner: its title
            title = _text(cells[0])
            if title.lower() not in DETAIL_BANNERS:
                unknown.append(_unknown(title, "table", title))
            continue
        prev = t.getprevious()
        title = _text(prev) if prev is not None and prev.tag not in ("table", "br") else ""
        m = _SECTION.match(title)
        title = m.group(2) if m else title
        unknown.append(_unknown(title or "untitled", "table", title or "(a table without a heading)"))


def _head(rows: list):
    """The header row (its cells ``th``), or None."""
    if rows:
        head = rows[0]
        if len(head) and head[0].tag == "th":
            return head
    return None


def _check_columns(rows: list, table: str, columns: tuple[frozenset[str], int], full: bool, unknown: list) -> None:
    """Columns of a table read by position: counted on every page, named when ``full`` (or when
    the count differs); an empty header cell (a bar graph's) is layout, not a field."""
    head = _head(rows)
    if head is None or (not full and len(head) == columns[1]):
        return
    known = columns[0]
    for th in head.iterchildren("th"):
        t = _text(th)
        if t and t.lower() not in known:
            unknown.append(_unknown(table, "column", t))


def _row_texts(row, n: int) -> list[str]:
    """The texts of a row's first ``n`` cells (``_text`` of each, inlined: this runs for every
    row of every detail page)."""
    out: list[str] = []
    for cell in row.iterchildren("td"):
        t = "".join(cell.itertext()) if len(cell) else (cell.text or "")
        out.append(" ".join(t.replace("\xa0", " ").split()) if t else "")
        if len(out) == n:
            break
    return out


def _value_rows(rows: list):
    """(label, value 1, value 2) texts of the rows of a label | value | value table, without its
    Total row."""
    for row in rows:
        texts = _row_texts(row, 3)
        if len(texts) >= 3 and texts[0].lower() != "total":
            yield texts


def _histogram(
    rows: list, bounds: tuple[float, ...], labels: tuple[str, ...], unit: float, where: str, unknown: list
) -> Histogram:
    hist, odd = _histogram_rows(_value_rows(rows), bounds, labels, unit, where)
    unknown.extend(_unknown(where.split(" ", 2)[2], "row", label) for label in odd)
    return hist


def _label_table(rows: list, where: str, unknown: list) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for label, rate_text, ratio_text in _value_rows(rows):
        name = SOURCE_NAMES.get(" ".join(label.lower().split()))
        if name is None:  # kept as its snake_case form, and reported
            name = snake(label)
            unknown.append(_unknown(where.split(" ", 2)[2], "row", label))
        rate = _num(rate_text, where, label) * MIB
        ratio = _num(ratio_text, where, label) / 100
        prev = out.get(name, (0.0, 0.0))
        out[name] = (prev[0] + rate, prev[1] + ratio)
    return out


def parse_vdisk_page(html: bytes, check_headers: bool = True) -> VDiskDetail:
    """A vdisk's detail view: read by the strict reader (strict.py) when the page is in the exact
    shape Stargate emits, else by lxml (parse_vdisk_page_lxml), which gives the same record for
    every page the strict reader reads and is the one that reports what is unknown and rejects
    garbage. ``check_headers``: see parse_vdisk_page_lxml (the strict reader checks the names of
    every table's columns on every page)."""
    try:
        detail = _strict.read_vdisk_page(html)
    except _strict.Unrecognised as exc:
        log.debug("vdisk detail view read with lxml: not in the strict reader's shape (%s)", exc)
        return parse_vdisk_page_lxml(html, check_headers)
    detail.strict = True
    return detail


def parse_vdisk_page_lxml(html: bytes, check_headers: bool = True) -> VDiskDetail:
    """A vdisk's detail view, read with lxml. ``check_headers``: name the columns of its tables
    even when their count is the expected one (the names are the same on every page of a build, so
    a probe checks one page in DETAIL_BATCH; see the module docstring)."""
    doc = _parse_html(_cut_bar_graphs(html) if html else html)
    sections, tables = _sections(doc)
    if "ops and randomness" not in sections:
        raise StargatePageError("no 'VDisk <id> Ops and Randomness' section (page cut off, or not a vdisk view)")
    unknown: list[Unknown] = []
    if tables > len(sections) + 1 or not sections.keys() <= DETAIL_SECTIONS:  # + the VDisk Stats banner
        for name in sections.keys() - DETAIL_SECTIONS:
            unknown.append(_unknown(name, "table", name))
        if tables > len(sections) + 1:
            _unclaimed_tables(doc, {id(t) for _, t in sections.values()}, unknown)
    vdisk_id, ops = sections["ops and randomness"]
    d = VDiskDetail(vdisk_id=vdisk_id)
    rows = _rows(ops)
    _check_columns(rows, "ops and randomness", _OPS_COLUMNS, check_headers, unknown)
    for row in rows:
        cells = _row_texts(row, 3)
        if len(cells) < 3:
            continue
        if not _ops_row(d, cells):
            unknown.append(_unknown("ops and randomness", "row", cells[0]))
    for key, attr, bounds, labels, columns, unit in _HISTOGRAMS:
        if key in sections:
            rows = _rows(sections[key][1])
            _check_columns(rows, key, columns, check_headers, unknown)
            setattr(d, attr, _histogram(rows, bounds, labels, unit, f"VDisk {vdisk_id} {key}", unknown))
    if "working set sizes" in sections:
        keys, data = _header_keys(sections["working set sizes"][1])
        windows = []
        for k in keys[1:]:
            window = _WINDOWS.get(k)
            if window is None:  # kept as its snake_case form, and reported
                window = snake(k)
                unknown.append(_unknown("working set sizes", "column", k))
            windows.append(window)
        for row in data:
            label = _wss_row(d, windows, [_text(x) for x in _cells(row)])
            if label is not None:
                unknown.append(_unknown("working set sizes", "row", label))
    for key, title, attr in _SOURCE_TABLES:
        if key in sections:
            rows = _rows(sections[key][1])
            _check_columns(rows, key, _SOURCE_COLUMNS, check_headers, unknown)
            setattr(d, attr, _label_table(rows, f"VDisk {vdisk_id} {title}", unknown))
    if "extent group up-migration" in sections:
        for row in _rows(sections["extent group up-migration"][1]):
            cells = _row_texts(row, 2)
            m = re.match(r"Last (\d+) seconds", cells[0]) if cells else None
            if m and len(cells) >= 2:
                d.up_migrations[f"{m.group(1)}s"] = _num(cells[1], f"VDisk {vdisk_id} Up-Migration")
            elif cells and cells[0]:
                unknown.append(_unknown("extent group up-migration", "row", cells[0]))
    if unknown:
        d.unknown = tuple(dict.fromkeys(unknown))  # each once per page
    return d
