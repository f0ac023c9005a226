"""Stargate helpers that only tests use (kept out of the exporter package).

- :class:`RequestsClient`: the probe's page client over a ``requests.Session``, so a test can
  hook the session (e.g. move a vdisk between two page reads). The exporter itself uses
  :class:`ioparallax.exporters.stargate.client.HttpClient`.
- :func:`load_mapping`: the ``vdisks:`` hand mapping of a config file.
- :func:`target_url`: a target string as the base URL a probe reads.
- :func:`get`: one page through a page client.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import requests

from ioparallax.exporters.stargate.address import Origin, parse_target
from ioparallax.exporters.stargate.client import Budget, DeadlineExceeded, FetchError, PageClient
from ioparallax.exporters.stargate.config import load_config

_CHUNK = 64 * 1024


def target_url(target: str) -> str:
    """``10.0.0.5`` / ``10.0.0.5:2009`` / ``[fd00::5]:2009`` / ``http://10.0.0.5:2009/`` -> base URL
    (TargetError for anything else, see targets.py)."""
    return parse_target(target).url


def load_mapping(path: str | None) -> dict[str, dict[str, str]]:
    return load_config(path).vdisks


class RequestsClient:
    """The probe's page client over a requests.Session, for tests that hook the session.
    The body is streamed under the same limit; the deadline bounds each read, not their sum."""

    def __init__(self, session: requests.Session) -> None:
        self.session = session

    def get_many(
        self, wanted: Sequence[tuple[Origin, str]], budget: Budget, concurrency: int = 1
    ) -> Iterator[tuple[int, bytes | FetchError]]:
        """The pages one after another (the tests that use this client hook the order)."""
        for i, (origin, path) in enumerate(wanted):
            try:
                yield i, self.get(origin, path, budget)
            except DeadlineExceeded as exc:
                raise DeadlineExceeded(str(exc), len(wanted) - i) from None
            except FetchError as exc:
                yield i, exc

    def get(self, origin: Origin, path: str, budget: Budget) -> bytes:
        url = f"{origin.scheme}://{origin.netloc}{path}"
        budget.take_page(url)
        left = budget.remaining()
        if left <= 0:
            raise DeadlineExceeded(f"{url}: deadline exceeded before the request")
        limit = budget.limits.body_size_limit
        try:
            with self.session.get(url, timeout=left, stream=True, allow_redirects=False) as r:
                if r.status_code != 200:
                    raise FetchError(f"{url}: HTTP {r.status_code}")
                body = bytearray()
                for chunk in r.iter_content(_CHUNK):
                    body += chunk
                    if len(body) > limit:
                        raise FetchError(f"{url}: page is over body_size_limit ({limit} bytes); not read further")
                    if budget.remaining() <= 0:
                        raise DeadlineExceeded(f"{url}: deadline exceeded while reading the page")
                return bytes(body)
        except requests.exceptions.ConnectionError as exc:
            cause = (
                "connection refused"
                if "refused" in str(exc).lower()
                else f"connection failed: {exc.__class__.__name__}"
            )
            raise FetchError(f"{url}: {cause}") from None
        except requests.exceptions.Timeout:
            raise DeadlineExceeded(f"{url}: deadline exceeded (no answer in time)") from None
        except requests.RequestException as exc:
            raise FetchError(f"{url}: {exc.__class__.__name__}: {exc}") from None


def get(client: PageClient, origin: Origin, path: str, budget: Budget) -> bytes:
    """One page through ``client.get_many`` (its FetchError, or DeadlineExceeded, raised)."""
    for _, got in client.get_many([(origin, path)], budget, 1):
        if isinstance(got, FetchError):
            raise got
        return got
    raise AssertionError("get_many answered nothing")
