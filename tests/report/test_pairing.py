"""--compare across hypervisors: which VM disk of B is which of A, B's matchers, B renamed to A."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ioparallax.report.data import Dataset
from ioparallax.report.pairing import disk_address, load_pairs, merge_matchers, pair, remap, split_matchers
from ioparallax.yamlconf import ConfigError
from tests.support import without_waiting


def test_vcenter_and_prism_addresses_of_one_disk_position_are_one_address():
    assert disk_address("scsi0:1") == disk_address("scsi.1") == "scsi.1"
    assert disk_address("sata0:2") == "sata.2" and disk_address("ide.0") == "ide.0"
    # a second controller has no Prism counterpart by position: only a pairs file pairs it
    assert disk_address("scsi1:0") == "scsi1:0" != disk_address("scsi.0")


def test_esxi_disks_pair_with_the_same_vms_ahv_disks():
    a = [("oltp-01", "scsi0:1"), ("oltp-02", "scsi0:1"), ("oltp-02", "scsi1:0")]
    b = [("oltp-01", "scsi.1"), ("oltp-02", "scsi.1"), ("oltp-02", "scsi.2"), ("other", "scsi.1")]
    assert pair(a, b) == {("oltp-01", "scsi.1"): ("oltp-01", "scsi0:1"), ("oltp-02", "scsi.1"): ("oltp-02", "scsi0:1")}


def test_same_names_pair_as_before():
    # two ranges or two Prometheus servers of one platform: every disk with itself
    keys = [("db", "scsi0:1"), ("db", "scsi0:2")]
    assert pair(keys, keys) == {k: k for k in keys}


def test_a_pairs_file_pairs_what_the_names_do_not_and_wins_over_them():
    a = [("oltp-01", "scsi0:1"), ("oltp-02", "scsi1:0")]
    b = [("oltp-01-ahv", "scsi.1"), ("oltp-02", "scsi.5"), ("oltp-01", "scsi.1")]
    pairs = {("oltp-01", "scsi0:1"): ("oltp-01-ahv", "scsi.1"), ("oltp-02", "scsi1:0"): ("oltp-02", "scsi.5")}
    got = pair(a, b, pairs)
    assert got == {("oltp-01-ahv", "scsi.1"): ("oltp-01", "scsi0:1"), ("oltp-02", "scsi.5"): ("oltp-02", "scsi1:0")}
    # A's oltp-01 is taken by the file: B's oltp-01 scsi.1 stays on its own side, never paired twice
    assert ("oltp-01", "scsi.1") not in got


def test_pairs_file_errors_name_the_file_and_key(tmp_path):
    good = tmp_path / "pairs.yml"
    good.write_text('"oltp-01 scsi0:1": "oltp-01-ahv scsi.1"\n')
    assert load_pairs(good) == {("oltp-01", "scsi0:1"): ("oltp-01-ahv", "scsi.1")}
    bad = tmp_path / "bad.yml"
    bad.write_text('"oltp-01": "oltp-01 scsi.1"\n')
    with pytest.raises(ConfigError) as e:
        load_pairs(bad)
    assert str(e.value).startswith(f"{bad}: oltp-01: ") and "<vm> <disk>" in str(e.value)
    twice = tmp_path / "twice.yml"
    twice.write_text('"a scsi0:1": "b scsi.1"\n"a scsi0:2": "b scsi.1"\n')
    with pytest.raises(ConfigError, match="paired twice"):
        load_pairs(twice)


def test_a_pairs_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    """--compare-pairs from a FIFO blocked the report for ever; it is opened as a regular file
    only. Run in a thread so that, were it to block, the test fails instead of hanging."""
    fifo = tmp_path / "pairs.yml"
    os.mkfifo(fifo)
    caught: list[BaseException] = []

    def load() -> None:
        try:
            load_pairs(fifo)
        except ConfigError as exc:
            caught.append(exc)

    without_waiting(fifo, load)
    assert len(caught) == 1 and str(caught[0]).startswith(f"{fifo}: ")
    assert "not a regular file (a FIFO)" in str(caught[0])


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x7f"])
def test_a_control_character_in_a_pairs_file_is_one_line_naming_the_line(tmp_path, char):
    """A NUL byte was a yaml.reader.ReaderError traceback."""
    bad = tmp_path / "pairs.yml"
    bad.write_text(f'"oltp-01 scsi0:1": "oltp-01-ahv scsi.1"\n"a scsi0:2": "b{char} scsi.2"\n')
    with pytest.raises(ConfigError) as e:
        load_pairs(bad)
    assert str(e.value) == (
        f"{bad}: line 2, column 16: invalid YAML: the character U+{ord(char):04X} (a control character) is not allowed"
    )


def test_b_matchers_replace_a_matchers_on_the_labels_they_name():
    assert merge_matchers('cluster="esxi"', 'cluster="ahv"') == 'cluster="ahv"'
    assert merge_matchers('cluster="esxi",vm=~"oltp.*"', '{cluster="ahv"}') == 'vm=~"oltp.*",cluster="ahv"'
    assert merge_matchers("", 'cluster="ahv"') == 'cluster="ahv"'
    assert split_matchers('{a="x,y", b!~"z\\"q"}') == [("a", 'a="x,y"'), ("b", 'b!~"z\\"q"')]
    with pytest.raises(ValueError, match="expected label matchers"):
        split_matchers('cluster="ahv" vm="x"')


def test_remap_renames_b_disks_to_their_a_names():
    ds = Dataset(times=np.arange(3.0))
    ds.series = {"vm_read_bytes": {("oltp-01", "scsi.1"): np.ones(3), ("x", "scsi.9"): np.zeros(3)}}
    ds.vdisk_of = {("oltp-01", "scsi.1"): "1000"}
    ds.vm_source_of = {("oltp-01", "scsi.1"): ("prism", 30.0)}
    ds.labelled = {"hygiene": [({"vm": "oltp-01", "disk": "scsi.1", "problem": "p"}, np.ones(3))]}
    ds.instant = {
        "guest_disk_info": [{"metric": {"vm": "oltp-01", "disk": "scsi.1", "device": "sdb"}, "value": [0, "1"]}]
    }
    remap(ds, {("oltp-01", "scsi.1"): ("oltp-01", "scsi0:1")})
    assert set(ds.series["vm_read_bytes"]) == {("oltp-01", "scsi0:1"), ("x", "scsi.9")}
    assert ds.vdisk_of == {("oltp-01", "scsi0:1"): "1000"}
    assert ds.vm_source_of == {("oltp-01", "scsi0:1"): ("prism", 30.0)}
    assert ds.labelled["hygiene"][0][0]["disk"] == "scsi0:1"
    # the identity chain (guest devices, partitions) follows: the disk page finds B's guest facts
    assert ds.instant["guest_disk_info"][0]["metric"]["disk"] == "scsi0:1"
