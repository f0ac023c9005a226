"""A strict reader of the vdisk detail view: the page in the exact shape Stargate emits, read with
bytes operations instead of an HTML parser and a tree walk (~2.8x cheaper, docs/stargate.md).

It gives what :func:`.parse.parse_vdisk_page`'s lxml path gives, or :class:`Unrecognised`, and
then the lxml path reads the page (parse.py). So it never decides anything the lxml path would
decide differently: whatever it is not certain to read the same way is not its to read.

The shape it reads (the per-vdisk view as published; docs/stargate-simulator.md, "Pages"):

- printable ASCII (and tab, CR, LF) only; in text, only the entities ``&lt;`` ``&gt;`` ``&amp;``
  ``&nbsp;``; no comment, no ``<tbody>``, lowercase tags;
- ``<html><head><title>..</title></head><body>``, the one-cell ``VDisk Stats`` banner table, then
  sections, then ``</body></html>``;
- a section: ``<br>`` s, a heading ``<b>`` or ``<h1>``-``<h6>`` reading ``VDisk <id> <Section>``,
  ``<br>`` s, a ``<table ...>`` whose rows are ``<tr>`` + cells + ``</tr>``: all ``<th>text</th>``,
  or ``<td>text</td>`` cells, and after a row's first four cells only empty ``<td ...></td>``
  (a histogram's bar graph); whitespace only between rows and between the tables;
- every section known, none twice; every table's header the one the parse expects (its column
  count and names), every row label one it maps (so the record's ``unknown`` is always empty: a
  page with anything unknown is the lxml path's to report), every value a plain number (a value the
  lxml path would reject is its to reject, with its message).

What the page means (units, the Total rows left out, the labels mapped, blanks read as 0) is the
lxml path's code, mirrored line for line in the table readers below; the equality is proved on
every page the simulator renders for every scenario and build and every capture under tests/,
and hostile variants must fall back (tests/exporters/stargate/test_stargate_strict.py).
"""

from __future__ import annotations

import re

from ioparallax.exporters.stargate.records import (
    _HISTOGRAMS,
    _OPS_COLUMNS,
    _SECTION,
    _SOURCE_COLUMNS,
    _SOURCE_TABLES,
    _WINDOWS,
    DETAIL_SECTIONS,
    MIB,
    SOURCE_NAMES,
    Histogram,
    StargatePageError,
    VDiskDetail,
    _empty_cells,
    _histogram_rows,
    _num,
    _ops_row,
    _wss_row,
)


class Unrecognised(Exception):
    """The page is not in the shape the strict reader reads (the reason, for a debug log)."""


#: Printable ASCII, tab, LF and CR: the bytes a page may hold.
_PLAIN = b"\t\n\r" + bytes(range(0x20, 0x7F))
_PROLOGUE = re.compile(
    rb"\s*<html>\s*<head>\s*<title>([^<>&]*)</title>\s*</head>\s*<body>\s*"
    rb"<table(?:\s[^<>]*)?><tr><td(?:\s[^<>]*)?>(?:<font(?:\s[^<>]*)?>)?VDisk&nbsp;Stats(?:</font>)?</td></tr></table>"
)
_EPILOGUE = re.compile(rb"\s*</body>\s*</html>\s*")
_HEADING = re.compile(rb"\s*(?:<br>\s*)*<(b|h[1-6])>([^<>]*)</\1>\s*(?:<br>\s*)*<table(?:\s[^<>]*)?>\s*")
_WHITESPACE = b" \t\n\r"
_OTHER_ENTITY = re.compile(rb"&(?!(?:lt|gt|amp|nbsp);)")
#: Cell texts (raw -> as read) and bar graphs already read: a page's labels and most of its
#: values and bar graphs are the same bytes on every page, so each is worked out once per
#: process. Bounded, whatever the pages (a hostile page could hold huge rows): at most _MEMO cell
#: texts of at most _MEMO_CELL bytes, and _MEMO_ROWS rows and bar graphs of at most _MEMO_ROW bytes
#: each (~1 MB and ~2 x 2 MB at the worst; the simulator's pages need ~100 rows, ~20 bar graphs);
#: past that, the rest is worked out each time.
_MEMO = 4096
_MEMO_CELL = 64
_MEMO_ROWS = 1024
_MEMO_ROW = 2048
_TEXTS: dict[bytes, str] = {}
_BAR_GRAPHS: set[bytes] = set()
#: Rows already read whose reading is the same on every page: headers and rows without values
#: (an empty histogram bucket, a blank Total). Never mutated by the readers below.
_ROWS: dict[bytes, Row] = {}
#: Value cells of a histogram row; the cells after them must be an empty bar graph.
_VALUE_CELLS = 4

Row = tuple[bool, tuple[str, ...]]  # (header row: th cells, the cells' texts)


def _text(raw: bytes) -> str:
    """A cell's text as the lxml path reads it: entities decoded, whitespace collapsed."""
    if b"&" in raw:
        if _OTHER_ENTITY.search(raw):
            raise Unrecognised("an entity other than &lt; &gt; &amp; &nbsp;")
        # Each & starts one of the four (checked above), so no replacement makes another.
        raw = raw.replace(b"&lt;", b"<").replace(b"&gt;", b">").replace(b"&nbsp;", b" ").replace(b"&amp;", b"&")
    return " ".join(raw.decode("ascii").split())


def _texts(raw: bytes, sep: bytes) -> tuple[str, ...]:
    """The texts of cells written ``a</tX><tX>b</tX><tX>c`` (no markup inside a cell)."""
    cells = raw.split(sep)
    tags = 2 * (len(cells) - 1)
    if raw.count(b"<") != tags or raw.count(b">") != tags:
        raise Unrecognised(f"markup in a cell: {raw[:60]!r}")
    out = list(map(_TEXTS.get, cells))
    if None in out:
        for i, cell in enumerate(cells):
            if out[i] is None:
                out[i] = text = _text(cell)
                if len(_TEXTS) < _MEMO and len(cell) <= _MEMO_CELL:
                    _TEXTS[cell] = text
    return tuple(out)  # type: ignore[arg-type]


def _bar_graph(tail: bytes) -> bool:
    """``tail`` (a row's cells after its values) is nothing but empty ``<td ...></td>`` cells
    (parse._empty_cells: the cells the bar-graph cut drops before lxml)."""
    if tail in _BAR_GRAPHS:
        return True
    if not _empty_cells(tail) or tail.count(b"<td ") + tail.count(b"<td>") != tail.count(b"</td>"):
        return False
    if len(_BAR_GRAPHS) < _MEMO_ROWS and len(tail) <= _MEMO_ROW:
        _BAR_GRAPHS.add(tail)
    return True


def _rows(body: bytes) -> list[Row]:
    """The rows of a table's body (from after ``<table ...>`` to before ``</table>``)."""
    rows: list[Row] = []
    pieces = body.split(b"</tr>")
    if pieces[-1].strip(_WHITESPACE):
        raise Unrecognised("text or markup after a table's last row")
    known = _ROWS.get
    for piece in pieces[:-1]:
        row = known(piece)
        if row is None:
            row = _row(piece)
            if (row[0] or not any(row[1][1:])) and len(_ROWS) < _MEMO_ROWS and len(piece) <= _MEMO_ROW:
                # a header, or a row without values
                _ROWS[piece] = row
        rows.append(row)
    return rows


def _row(piece: bytes) -> Row:
    """A row: ``<tr>`` and its cells, up to its ``</tr>``."""
    if piece[:1] in b" \t\r\n":
        piece = piece.lstrip(_WHITESPACE)
    if piece.startswith(b"<tr><td>"):
        values = piece[8:].split(b"</td><td>", _VALUE_CELLS - 1)
        last, end, tail = values[-1].partition(b"</td>")
        if not end:
            raise Unrecognised(f"a row that does not end with its cell: {piece[:60]!r}")
        if tail and (len(values) < _VALUE_CELLS or not _bar_graph(tail)):
            raise Unrecognised(f"cells after a row's values that are not empty: {tail[:60]!r}")
        return (False, _texts(piece[8 : len(piece) - len(tail) - 5], b"</td><td>"))
    if piece.startswith(b"<tr><th>") and piece.endswith(b"</th>"):
        return (True, _texts(piece[8:-5], b"</th><th>"))
    raise Unrecognised(f"a row in another shape: {piece[:60]!r}")


def _sections(html: bytes) -> dict[str, tuple[str, list[Row]]]:
    """Section name (lowercased) -> (vdisk id, its rows)."""
    if html.translate(None, _PLAIN):
        raise Unrecognised("a byte that is not printable ASCII")
    m = _PROLOGUE.match(html)
    if m is None:
        raise Unrecognised("not the detail view's head and VDisk Stats banner")
    if _SECTION.match(" ".join(m.group(1).decode("ascii").split())):
        raise Unrecognised("a title that reads as a section heading")
    chunks = html[m.end() :].split(b"</table>")
    if not _EPILOGUE.fullmatch(chunks[-1]):
        raise Unrecognised("not the detail view's end")
    out: dict[str, tuple[str, list[Row]]] = {}
    for chunk in chunks[:-1]:
        h = _HEADING.match(chunk)
        if h is None:
            raise Unrecognised(f"not a section heading and its table: {chunk[:60]!r}")
        s = _SECTION.match(_text(h.group(2)))
        if s is None:
            raise Unrecognised(f"a heading that is not 'VDisk <id> <Section>': {h.group(2)[:60]!r}")
        name = s.group(2).lower()
        if name not in DETAIL_SECTIONS or name in out:
            raise Unrecognised(f"an unknown or repeated section {s.group(2)[:60]!r}")
        out[name] = (s.group(1), _rows(chunk[h.end() :]))
    return out


def _check_header(rows: list[Row], columns: tuple[frozenset[str], int]) -> list[Row]:
    """The table's rows after its one header row, which has the expected column count and names
    (the lxml path then reports no column, with or without check_headers)."""
    if not rows or not rows[0][0]:
        raise Unrecognised("a table without its header row")
    head = rows[0][1]
    if len(head) != columns[1] or any(t and t.lower() not in columns[0] for t in head):
        raise Unrecognised(f"a table's header in another shape: {head}")
    if any(header for header, _ in rows[1:]):
        raise Unrecognised("a second header row")
    return rows[1:]


# The readers of each table: parse.py's (the lxml path's) code on (header?, texts) rows, with every
# place where it would note something unknown raising Unrecognised instead.


def _value_rows(rows: list[Row]):
    for _, texts in rows:
        if len(texts) >= 3 and texts[0].lower() != "total":
            yield texts[:3]


def _histogram(
    rows: list[Row], bounds: tuple[float, ...], labels: tuple[str, ...], unit: float, where: str
) -> Histogram:
    hist, odd = _histogram_rows(_value_rows(rows), bounds, labels, unit, where)
    if odd:
        raise Unrecognised(f"{where}: bucket {odd[0]!r}")
    return hist


def _label_table(rows: list[Row], where: str) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for label, rate_text, ratio_text in _value_rows(rows):
        name = SOURCE_NAMES.get(" ".join(label.lower().split()))
        if name is None:
            raise Unrecognised(f"{where}: row {label!r}")
        rate = _num(rate_text, where, label) * MIB
        ratio = _num(ratio_text, where, label) / 100
        prev = out.get(name, (0.0, 0.0))
        out[name] = (prev[0] + rate, prev[1] + ratio)
    return out


_UP_MIGRATION = re.compile(r"Last (\d+) seconds")


def read_vdisk_page(html: bytes) -> VDiskDetail:
    """The detail view's record, equal to the lxml path's; Unrecognised for a page in any other
    shape, or one the lxml path would reject or report something unknown of."""
    try:
        return _read(html)
    except StargatePageError as exc:  # a value the lxml path rejects, with its own message
        raise Unrecognised(str(exc)) from None
    except UnicodeDecodeError:  # not reached: the bytes are checked to be ASCII
        raise Unrecognised("not ASCII") from None


def _read(html: bytes) -> VDiskDetail:
    sections = _sections(html)
    if "ops and randomness" not in sections:
        raise Unrecognised("no Ops and Randomness section")
    vdisk_id, rows = sections["ops and randomness"]
    d = VDiskDetail(vdisk_id=vdisk_id)
    for _, cells in _check_header(rows, _OPS_COLUMNS):
        if len(cells) < 3:
            raise Unrecognised("a short Ops and Randomness row")
        if not _ops_row(d, cells):
            raise Unrecognised(f"Ops and Randomness row {cells[0]!r}")
    for key, attr, bounds, labels, columns, unit in _HISTOGRAMS:
        if key in sections:
            rows = _check_header(sections[key][1], columns)
            setattr(d, attr, _histogram(rows, bounds, labels, unit, f"VDisk {vdisk_id} {key}"))
    if "working set sizes" in sections:
        rows = sections["working set sizes"][1]
        if not rows or not rows[0][0] or any(header for header, _ in rows[1:]):
            raise Unrecognised("Working Set Sizes without its one header row")
        windows = []
        for k in rows[0][1][1:]:
            window = _WINDOWS.get(k)
            if window is None:
                raise Unrecognised(f"Working Set Sizes column {k!r}")
            windows.append(window)
        for _, cells in rows[1:]:
            label = _wss_row(d, windows, cells)
            if label is not None:
                raise Unrecognised(f"Working Set Sizes row {label!r}")
    for key, title, attr in _SOURCE_TABLES:
        if key in sections:
            rows = _check_header(sections[key][1], _SOURCE_COLUMNS)
            setattr(d, attr, _label_table(rows, f"VDisk {vdisk_id} {title}"))
    if "extent group up-migration" in sections:
        for header, cells in sections["extent group up-migration"][1]:
            m = _UP_MIGRATION.match(cells[0]) if cells and not header else None
            if m is None or len(cells) < 2:
                raise Unrecognised(f"Extent Group Up-Migration row {cells[:1]!r}")
            d.up_migrations[f"{m.group(1)}s"] = _num(cells[1], f"VDisk {vdisk_id} Up-Migration")
    return d
