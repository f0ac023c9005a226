"""Every capture in this folder (Stargate, vCenter and Prism), replayed: the metrics must be its
expected ones, line for line (all but durations and ages). A capture's expectation is ``<name>.prom`` beside it
when there is one (written, after review, when the capture showed a misread page), else the
``metrics.prom`` it holds (what the capturing exporter made of it). See README.md."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from ioparallax.exporters.prism import capture as prism
from ioparallax.exporters.stargate import capture as stargate
from ioparallax.exporters.vcenter import capture as vcenter

HERE = Path(__file__).parent
CAPTURES = sorted(HERE.glob("*.tar.gz"))


def kind(path: Path):
    """The capture module of a capture: stargate, vcenter or prism (by its manifest's kind)."""
    with tarfile.open(path) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        manifest = json.load(member)
    return {"stargate-capture": stargate, "vcenter-capture": vcenter, "prism-capture": prism}[manifest["kind"]]


def expected(path: Path, module) -> tuple[str, str]:
    """(the expected exposition, where it comes from)."""
    beside = path.with_name(path.name[: -len(".tar.gz")] + ".prom")
    if beside.exists():
        return beside.read_text(), beside.name
    return module.read(str(path)).metrics, f"{path.name}: metrics.prom"


def test_the_folder_holds_captures():
    """The walk below must have something to walk (a glob that matches nothing tests nothing)."""
    names = {p.name for p in CAPTURES}
    assert {
        "simulator-zero-heavy-2016.tar.gz",
        "mutated-extra-table-row-column.tar.gz",
        "vcenter-simulator-postgres.tar.gz",
        "prism-simulator-noisy-neighbour.tar.gz",
    } <= names


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_capture_replays_to_its_expected_metrics(path):
    module = kind(path)
    cap = module.read(str(path))
    if module is stargate:
        result, metrics = stargate.replay(cap)
        assert result.up == cap.manifest["up"], result.error
    else:
        metrics = module.replay(cap)
    want, source = expected(path, module)
    comparable = module.comparable
    got = comparable(metrics.decode())
    missing = [line for line in comparable(want) if line not in set(got)]
    extra = [line for line in got if line not in set(comparable(want))]
    assert (missing, extra) == ([], []), f"replay differs from {source}"
    assert got == comparable(want), f"the same lines in another order than {source}"


def test_the_mutated_capture_shows_what_the_parser_does_not_read():
    _, metrics = stargate.replay(stargate.read(str(HERE / "mutated-extra-table-row-column.tar.gz")))
    text = metrics.decode()
    assert "stargate_parse_unknown_fields 7.0" in text
    for line in (
        'stargate_parse_unknown_field_pages{page="main",table="hosted_vdisks",kind="column",item="Latency (ms)"} 1.0',
        'stargate_parse_unknown_field_pages{page="vdisk",table="read_source",kind="row",item="Cloud Tier"} 2.0',
        'stargate_parse_unknown_field_pages{page="vdisk",table="erasure_coding",kind="table",item="erasure coding"} 2.0',
    ):
        assert line in text


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_replay_command_writes_the_metrics_and_checks_them(path, tmp_path, capsys):
    """``<exporter>-exporter replay CAPTURE -o FILE`` (the one replay command of common/capture.py)
    writes what the replay gives; ``--check FILE`` then finds them as expected, and names a line
    that was taken away."""
    module = kind(path)
    out = tmp_path / "replayed.prom"
    assert module.replay_main([str(path), "-o", str(out)]) == 0
    written = out.read_text()
    assert written.startswith("# HELP ")
    assert module.comparable(written) == module.comparable(expected(path, module)[0])
    capsys.readouterr()
    assert module.replay_main([str(path), "--check", str(out)]) == 0
    assert "as expected" in capsys.readouterr().out
    lines = written.splitlines(keepends=True)
    dropped = next(line for line in lines if line.strip() in set(module.comparable(written)))
    out.write_text("".join(line for line in lines if line != dropped))
    assert module.replay_main([str(path), "--check", str(out)]) == 1
    report = capsys.readouterr().out
    assert "0 lines expected and not made, 1 made and not expected" in report
    assert f"  + {dropped.strip()}" in report
