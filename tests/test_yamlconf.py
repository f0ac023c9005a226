"""The project's one YAML loader (ioparallax.yamlconf, issue 25): every file the project reads
refuses what could make a small file cost gigabytes or hide a mistake (aliases, duplicate keys,
deep nesting, huge or non-UTF-8 files) with one error naming the file, the line and the key,
and no error ever prints a whole value.

Each hostile file is tried on every reader: the five exporters' --config.file and
--web.config.file (real processes: exit 2, one error line, no traceback, within seconds), the
scenario library's loader and the mixin config.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ioparallax.mixin.config import load_config as load_mixin_config
from ioparallax.simulators.scenario.model import load_scenario
from ioparallax.yamlconf import MAX_YAML_BYTES, ConfigError, Section, cut, load_yaml, parse_yaml
from tests.support import free_port, run_entry_point

#: Ten levels of nine aliases each: 9^10 (3.5 billion) leaves once expanded; 60 s and 2.4 GB then
#: a MemoryError before the loader refused aliases.
ALIAS_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 11)
)

#: name -> (file bytes, words the error must hold)
HOSTILE_YAML: dict[str, tuple[bytes, str]] = {
    "alias_bomb": (ALIAS_BOMB.encode(), "line 1, column 5: YAML anchor &a0 is not accepted"),
    "alias_only": (b"a: *nowhere\n", "YAML alias *nowhere is not accepted"),
    "merge_key_alias": (b"base: &b {x: 1}\nother:\n  <<: *b\n", "YAML anchor &b is not accepted"),
    "duplicate_top_level_key": (
        b"targets: {}\nallow_unlisted_targets: false\ntargets: {}\n",
        "targets: line 3, column 1: duplicate key (first at line 1)",
    ),
    "duplicate_nested_key": (b"a:\n  b: 1\n  c: 2\n  b: 3\n", "b: line 4, column 3: duplicate key (first at line 2)"),
    "not_utf8": (b"targets:\n  - \xff\xfe\n", "not UTF-8 text (byte 0xff on line 2)"),
    "nested_too_deep": (b"a: " + b"[" * 200 + b"]" * 200 + b"\n", "nested more than 50 levels deep"),
    "too_large": (b"# " + b"x" * (MAX_YAML_BYTES + 10) + b"\n", "larger than 4 MiB"),
    "python_tag": (b"a: !!python/object/apply:os.system [true]\n", "invalid YAML (line 1, column 4)"),
    "syntax_error": (b"a: [1, 2\n", "invalid YAML"),
    # PyYAML's constructors raised a bare ValueError for these; a 5,000-digit hex integer parsed
    # and then could not be printed in an error message
    "int_5000_digits": (b"port: " + b"9" * 5000 + b"\n", "line 1, column 7: cannot read this value: Exceeds the limit"),
    "hex_5000_digits": (b"port: 0x" + b"f" * 5000 + b"\n", "line 1, column 7: an integer of 20000 bits is beyond"),
    "timestamp_month_13": (
        b"at: !!timestamp 2026-13-45\n",
        "line 1, column 5: cannot read this value: month must be in 1..12",
    ),
    "int_tag_on_text": (b"n: !!int x\n", "cannot read this value: invalid literal for int()"),
    # PyYAML's reader refuses these before parsing, with a ReaderError that has no mark and
    # escaped every loader as a traceback (issue 33)
    "nul_byte": (b"targets:\n  - a\x00b\n", "line 2, column 6: invalid YAML: the character U+0000"),
    "control_character": (b"a: \x01\n", "line 1, column 4: invalid YAML: the character U+0001"),
    "delete_character": (b"a: 1\nb: x\x7f\n", "line 2, column 5: invalid YAML: the character U+007F"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_YAML))
def test_hostile_yaml_is_one_error_naming_file_and_line(tmp_path, case):
    text, words = HOSTILE_YAML[case]
    path = tmp_path / f"{case}.yml"
    path.write_bytes(text)
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as exc:
        load_yaml(path)
    assert time.monotonic() - t0 < 2
    message = str(exc.value)
    assert message.startswith(f"{path}: "), message
    assert words in message, message
    assert len(message) < 300 + len(str(path)), message


def test_plain_yaml_still_loads(tmp_path):
    path = tmp_path / "ok.yml"
    path.write_bytes(b"\xef\xbb\xbftargets:\n  cvm1: {address: 10.0.0.1}\nlist: [1, 2]\nmerge: {<<: {x: 1}, y: 2}\n")
    assert load_yaml(path) == {"targets": {"cvm1": {"address": "10.0.0.1"}}, "list": [1, 2], "merge": {"x": 1, "y": 2}}


def test_a_missing_file_names_it(tmp_path):
    with pytest.raises(ConfigError, match=r"nope.yml: cannot read file: No such file or directory"):
        load_yaml(tmp_path / "nope.yml")


def test_errors_never_print_a_whole_value():
    huge = "x" * 1_000_000
    with pytest.raises(ConfigError) as exc:
        Section({"port": huge}, "c.yml").get("port", int)
    assert len(str(exc.value)) < 200 and "c.yml: port: expected an integer, got str 'xxx" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        Section({"port": [list(range(1000))] * 1000}, "c.yml").get("port", int)
    assert len(str(exc.value)) < 200
    assert len(cut(dict.fromkeys(range(10000), "y" * 10000))) < 200
    # a message built elsewhere is cut too: one log line
    assert len(str(ConfigError("c.yml", "k", "z" * 100_000))) < 500


def test_a_duplicate_key_deep_in_a_list_is_found():
    text = "vms:\n- name: a\n  disks: []\n- name: b\n  size: 1\n  size: 2\n"
    with pytest.raises(ConfigError, match=r"^f.yml: size: line 6, column 3: duplicate key \(first at line 5\)"):
        parse_yaml(text, "f.yml")


# ---- every reader of the project


_EXPORTERS = {
    "fio-exporter": ["--no-collector.guest-disk"],
    "stargate-exporter": [],
    "vcenter-exporter": ["--vcenter.target=127.0.0.1:1"],
    "diskspd-exporter": [],
    "prism-exporter": ["--prism.target=127.0.0.1:1"],
}


@pytest.mark.parametrize("flag", ["--config.file", "--web.config.file"])
@pytest.mark.parametrize("exporter", sorted(_EXPORTERS))
@pytest.mark.parametrize("case", ["alias_bomb", "duplicate_top_level_key", "not_utf8", "nul_byte"])
def test_every_exporter_refuses_hostile_yaml_in_one_line(tmp_path, exporter, flag, case):
    path = tmp_path / "hostile.yml"
    path.write_bytes(HOSTILE_YAML[case][0])
    t0 = time.monotonic()
    extra = (
        _EXPORTERS[exporter] if flag == "--web.config.file" else [a for a in _EXPORTERS[exporter] if "target" not in a]
    )
    res = run_entry_point(exporter, [f"--web.listen-address=127.0.0.1:{free_port()}", f"{flag}={path}", *extra])
    assert time.monotonic() - t0 < 20
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if str(path) in line]
    assert len(errors) == 1 and "error" in errors[0], out
    assert HOSTILE_YAML[case][1].split(":")[-1].strip() in errors[0], errors[0]


@pytest.mark.parametrize("case", ["alias_bomb", "duplicate_nested_key", "not_utf8", "control_character"])
def test_scenarios_and_the_mixin_config_use_the_same_loader(tmp_path, case):
    path = tmp_path / "hostile.yml"
    path.write_bytes(HOSTILE_YAML[case][0])
    for load in (load_scenario, load_mixin_config):
        t0 = time.monotonic()
        with pytest.raises(ConfigError) as exc:
            load(path)
        assert time.monotonic() - t0 < 2
        assert str(exc.value).startswith(f"{path}: ") and HOSTILE_YAML[case][1] in str(exc.value)


def test_scenario_fio_options_must_be_scalars(tmp_path):
    """A list or mapping as a fio option was written out as its repr (expanded, once aliases
    worked); it is refused naming the option."""
    base = Path(__file__).parents[1] / "ioparallax/simulators/scenario/scenarios/bursty-1m.yaml"
    text = base.read_text()
    assert "fio_options: {direct: " in text
    path = tmp_path / "s.yaml"
    path.write_text(
        text.replace("fio_options: {direct: ", 'fio_options: {bad: [1, 2, "' + "z" * 5000 + '"], direct: ', 1)
    )
    with pytest.raises(ConfigError) as exc:
        load_scenario(path)
    assert "fio_options.bad: expected a string or a number, got list [1, 2, 'zzz" in str(exc.value)
    assert len(str(exc.value)) < 400 + len(str(path))
