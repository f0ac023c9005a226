"""`ioparallax-scenario check` warns where a stream's iodepth, IOPS and latency contradict Little's law."""

import json

import pytest
import yaml

from ioparallax.simulators.scenario import list_scenarios, load_scenario, parse_scenario
from ioparallax.simulators.scenario.checks import LITTLE_TOLERANCE, little_warnings
from ioparallax.simulators.scenario.cli import main as scenario_cli
from tests.support import scenario_data

# One VM disk, one stream: 5,000 IO/s at 400 us is 2 I/Os in flight (Little's law).
BASE = scenario_data(
    {
        "name": "vm1",
        "disks": [
            {
                "streams": [
                    {
                        "name": "s",
                        "read_iops": 3500,
                        "write_iops": 1500,
                        "latency": "400us",
                        "iodepth": 2,
                        "fio_options": {"direct": "1", "ioengine": "libaio"},
                    }
                ]
            }
        ],
    }
)


def scenario(**stream):
    data = json.loads(json.dumps(BASE))
    s = data["vms"][0]["disks"][0]["streams"][0]
    options = stream.pop("fio_options", {})
    s.update(stream)
    s["fio_options"].update(options)
    return parse_scenario(data, "t.yaml")


def test_a_stream_at_the_depth_it_implies_is_silent():
    assert little_warnings(scenario()) == []


def test_a_direct_steady_stream_asking_far_more_than_it_implies_warns_with_the_numbers():
    [w] = little_warnings(scenario(iodepth=16))
    assert w.startswith("vms[0].disks[0].streams[0] (s): iodepth 16")
    assert "imply 2.00 in flight" in w and "asked/implied 8.0" in w and f"tolerance {LITTLE_TOLERANCE:g}" in w


def test_a_stream_implying_more_than_its_depth_allows_warns():
    [w] = little_warnings(scenario(iodepth=1, latency="4ms"))  # 5,000 x 4 ms = 20 in flight
    assert "imply 20.00 in flight, more than iodepth 1 allows" in w


def test_the_iodepth_fio_option_is_the_asked_depth():
    # The guest simulator writes fio_options' iodepth when given, so that is what the rules see.
    [w] = little_warnings(scenario(fio_options={"iodepth": "16"}))
    assert "iodepth 16" in w


@pytest.mark.parametrize("depth, warns", [(2, False), (3, False), (4, True)])
def test_the_tolerance_is_a_factor_either_way(depth, warns):
    # 3 / 2 = 1.5 is at the tolerance, 4 / 2 = 2 beyond it
    assert bool(little_warnings(scenario(iodepth=depth))) is warns
    assert little_warnings(scenario(iodepth=depth), tolerance=2.5) == []


def test_bursty_and_paced_streams_are_not_judged_on_the_asked_depth():
    assert little_warnings(scenario(iodepth=16, burst={"every": "20s", "length": "1s"})) == []
    assert little_warnings(scenario(iodepth=16, fio_options={"rate_iops": "3500,1500"})) == []
    assert little_warnings(scenario(iodepth=16, fio_options={"fdatasync": "1"})) == []


@pytest.mark.parametrize("options", [{"direct": "0"}, {"direct": None}, {"buffered": "1", "direct": None}])
def test_a_buffered_stream_warns_that_its_depth_will_not_be_reached(options):
    sc = scenario(iodepth=16)
    stream = sc.vms[0].disks[0].streams[0]
    opts = {k: v for k, v in {**stream.fio_options, **options}.items() if v is not None}
    data = json.loads(json.dumps(BASE))
    data["vms"][0]["disks"][0]["streams"][0].update(iodepth=16, fio_options=opts)
    [w] = little_warnings(parse_scenario(data, "t.yaml"))
    assert "buffered I/O" in w and "iodepth 16 will not be reached" in w and "asked/implied 8.0" in w


def test_a_buffered_stream_at_depth_one_is_silent():
    assert little_warnings(scenario(iodepth=1, latency="200us", fio_options={"direct": "0"})) == []


def test_the_library_is_consistent_except_the_buffered_scenario():
    warned = {name: little_warnings(load_scenario(name)) for name in list_scenarios()}
    assert len(warned.pop("buffered-qd")) == 1
    assert {name: w for name, w in warned.items() if w} == {}


def test_cli_check_prints_warnings_and_fails_only_when_strict(tmp_path, capsys):
    path = tmp_path / "qd.yaml"
    data = json.loads(json.dumps(BASE))
    data["vms"][0]["disks"][0]["streams"][0]["iodepth"] = 16
    path.write_text(yaml.safe_dump(data))
    assert scenario_cli(["check", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "OK" in out and f"warning: {path}: vms[0].disks[0].streams[0] (s): iodepth 16" in err
    assert scenario_cli(["check", "--strict", str(path)]) == 1
    capsys.readouterr()
    assert scenario_cli(["check", "--strict", "--tolerance", "10", str(path)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert scenario_cli(["check", "--strict", "clean-oltp"]) == 0
