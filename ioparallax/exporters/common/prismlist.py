"""Prism v2.0 lists, shared by ``prism-exporter`` and the Stargate exporter's Prism mapping: the
list envelope (:func:`entities`, :class:`ParseError`) and every page of a list (``virtual_disks``,
``vms``, ``hosts``, :func:`list_all`): the first page (``count``,
``page=1``) gives ``metadata.grand_total_entities``; the others are then asked for
``concurrency`` at a time (Prism builds one while the client receives another).

Prism pages v2.0 lists by default on some builds (the public clients all send ``count`` and
``page``): a client that asks without them may see only the first page. The transport is the
caller's: ``get(params)`` returns (the decoded JSON answer, anything the caller keeps per page,
such as its Date)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

#: Most pages one list may fetch (page_size x this entities).
MAX_PAGES = 1000
#: Pages of one list asked for at once after the first.
PAGE_CONCURRENCY = 2

T = TypeVar("T")


class ParseError(ValueError):
    """An answer whose shape is not Prism's (the cause names what is missing)."""


def entities(doc: Any, what: str) -> tuple[list[dict[str, Any]], int | None]:
    """(entities, grand_total_entities or None) of a v2.0 list answer; ParseError otherwise."""
    if not isinstance(doc, dict):
        raise ParseError(f"the {what} answer is not a JSON object")
    ents = doc.get("entities")
    if not isinstance(ents, list):
        raise ParseError(f"the {what} answer has no 'entities' list")
    meta = doc.get("metadata")
    total = meta.get("grand_total_entities") if isinstance(meta, dict) else None
    if isinstance(total, bool) or not isinstance(total, int):
        total = None
    return [x for x in ents if isinstance(x, dict)], total


def list_all(
    get: Callable[[dict[str, Any]], tuple[Any, T]],
    what: str,
    page_size: int,
    params: dict[str, Any] | None = None,
    max_pages: int = MAX_PAGES,
    concurrency: int = PAGE_CONCURRENCY,
    name: str = "prism",
) -> tuple[list[dict[str, Any]], list[T], int]:
    """(entities of every page, what ``get`` returned beside each page's answer, requests made).
    A page that is not a v2.0 list raises :class:`~.parse.ParseError` naming ``what``.

    A Prism whose paging lies ends the list with a ParseError, never a partial list shown as
    complete nor an endless one: a total above ``max_pages`` pages, a page longer than asked
    for, a page that only repeats entities already read (paging that does not advance). A short
    or empty page ends the list early (a disk deleted between two pages)."""
    base = dict(params or {})
    doc, extra = get({**base, "count": page_size, "page": 1})
    ents, total = entities(doc, what)
    out, extras = list(ents), [extra]
    if total is None or len(ents) >= total or len(ents) < page_size:
        return out, extras, 1  # the whole list (a Prism that ignores count gives it in one page)
    _check_page(ents, page_size, what, 1)
    if total > max_pages * page_size:
        raise ParseError(
            f"the {what} answer claims {total} entities, more than {max_pages} pages of {page_size} "
            "(page_size): not read, rather than shown incomplete"
        )
    pages = -(-total // page_size)
    seen = {_entity_key(e) for e in ents}
    requests = 1

    def page(n: int) -> tuple[list[dict[str, Any]], T]:
        d, x = get({**base, "count": page_size, "page": n})
        return entities(d, what)[0], x

    with ThreadPoolExecutor(concurrency, thread_name_prefix=f"pages {name}") as pool:
        for batch in range(2, pages + 1, concurrency):
            numbers = range(batch, min(pages, batch + concurrency - 1) + 1)
            requests += len(numbers)
            for n, (page_ents, x) in zip(numbers, pool.map(page, numbers), strict=True):
                _check_page(page_ents, page_size, what, n)
                keys = {_entity_key(e) for e in page_ents}
                if page_ents and keys <= seen:
                    raise ParseError(
                        f"page {n} of {what} only repeats entities of earlier pages (Prism's paging does not advance)"
                    )
                seen |= keys
                out.extend(page_ents)
                extras.append(x)
                if len(page_ents) < page_size:  # the end, before the total said
                    return out, extras, requests
    return out, extras, requests


def _check_page(ents: list[dict[str, Any]], size: int, what: str, n: int) -> None:
    if len(ents) > size:
        raise ParseError(f"page {n} of {what} holds {len(ents)} entities, more than the {size} asked for")


def _entity_key(e: dict[str, Any]) -> object:
    uuid = e.get("uuid")
    return uuid if isinstance(uuid, str) else id(e)
