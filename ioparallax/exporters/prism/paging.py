"""Every page of a Prism v2.0 list (``virtual_disks``, ``vms``, ``hosts``), shared by
``prism-exporter`` and the Stargate exporter's Prism mapping: the first page (``count``,
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

from .parse import entities

#: Most pages one list may fetch (page_size x this entities).
MAX_PAGES = 1000
#: Pages of one list asked for at once after the first.
PAGE_CONCURRENCY = 2

T = TypeVar("T")


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
    A page that is not a v2.0 list raises :class:`~.parse.ParseError` naming ``what``."""
    base = dict(params or {})
    doc, extra = get({**base, "count": page_size, "page": 1})
    ents, total = entities(doc, what)
    out, extras = list(ents), [extra]
    if total is None or len(ents) >= total or len(ents) < page_size:
        return out, extras, 1
    pages = min(max_pages, -(-total // page_size))

    def page(n: int) -> tuple[list[dict[str, Any]], T]:
        d, x = get({**base, "count": page_size, "page": n})
        return entities(d, what)[0], x

    with ThreadPoolExecutor(concurrency, thread_name_prefix=f"pages {name}") as pool:
        for page_ents, x in pool.map(page, range(2, pages + 1)):
            out.extend(page_ents)
            extras.append(x)
    return out, extras, pages
