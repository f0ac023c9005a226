"""Every capture in this folder, replayed: the metrics must be its expected ones, line for line
(all but stargate_scrape_duration_seconds). A capture's expectation is ``<name>.prom`` beside it
when there is one (written, after review, when the capture showed a misread page), else the
``metrics.prom`` it holds (what the capturing exporter made of it). See README.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from ioparallax.exporters.stargate.capture import comparable, read, replay

HERE = Path(__file__).parent
CAPTURES = sorted(HERE.glob("*.tar.gz"))


def expected(path: Path) -> tuple[str, str]:
    """(the expected exposition, where it comes from)."""
    beside = path.with_name(path.name[: -len(".tar.gz")] + ".prom")
    if beside.exists():
        return beside.read_text(), beside.name
    return read(str(path)).metrics, f"{path.name}: metrics.prom"


def test_the_folder_holds_captures():
    """The walk below must have something to walk (a glob that matches nothing tests nothing)."""
    names = {p.name for p in CAPTURES}
    assert {"simulator-zero-heavy-2016.tar.gz", "mutated-extra-table-row-column.tar.gz"} <= names


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_capture_replays_to_its_expected_metrics(path):
    cap = read(str(path))
    result, metrics = replay(cap)
    assert result.up == cap.manifest["up"], result.error
    want, source = expected(path)
    got = comparable(metrics.decode())
    missing = [line for line in comparable(want) if line not in set(got)]
    extra = [line for line in got if line not in set(comparable(want))]
    assert (missing, extra) == ([], []), f"replay differs from {source}"
    assert got == comparable(want), f"the same lines in another order than {source}"


def test_the_mutated_capture_shows_what_the_parser_does_not_read():
    _, metrics = replay(read(str(HERE / "mutated-extra-table-row-column.tar.gz")))
    text = metrics.decode()
    assert "stargate_parse_unknown_fields 7.0" in text
    for line in (
        'stargate_parse_unknown_field_pages{page="main",table="hosted_vdisks",kind="column",item="Latency (ms)"} 1.0',
        'stargate_parse_unknown_field_pages{page="vdisk",table="read_source",kind="row",item="Cloud Tier"} 2.0',
        'stargate_parse_unknown_field_pages{page="vdisk",table="erasure_coding",kind="table",item="erasure coding"} 2.0',
    ):
        assert line in text
